package jsonschema_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/labctl/labctl/internal/jsonschema"
)

// boxSource is the source of Box and Lid below: Generate reads the doc
// comments and markers from it, the fields from the types.
const boxSource = `package toy

// Box holds things.
type Box struct {
	// Name names the box.
	// +kubebuilder:validation:Pattern=` + "`^[a-z]+$`" + `
	Name string ` + "`json:\"name\"`" + `
	// +kubebuilder:validation:Enum=small;large
	Size string ` + "`json:\"size,omitempty\"`" + `
	// +kubebuilder:validation:items:MinLength=1
	Tags []string ` + "`json:\"tags,omitempty\"`" + `
	Lid  *Lid ` + "`json:\"lid,omitempty\"`" + `
	Any  json.RawMessage ` + "`json:\"any,omitempty\"`" + `
}

// Lid closes a box.
type Lid struct {
	// +required
	Color string ` + "`json:\"color,omitempty\"`" + `
}
`

type Box struct {
	Name string          `json:"name"`
	Size string          `json:"size,omitempty"`
	Tags []string        `json:"tags,omitempty"`
	Lid  *Lid            `json:"lid,omitempty"`
	Any  json.RawMessage `json:"any,omitempty"`
}

type Lid struct {
	Color string `json:"color,omitempty"`
}

func generate(t *testing.T, src string) ([]byte, error) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "toy.go"), []byte(src), 0o644))
	return jsonschema.Generate(reflect.TypeFor[Box](), jsonschema.Options{Title: "box", SrcDir: dir})
}

func TestGenerateReadsDocsAndMarkers(t *testing.T) {
	raw, err := generate(t, boxSource)
	require.NoError(t, err)
	var s struct {
		Ref         string `json:"$ref"`
		Definitions map[string]struct {
			Description string                     `json:"description"`
			Required    []string                   `json:"required"`
			Properties  map[string]json.RawMessage `json:"properties"`
		} `json:"definitions"`
	}
	require.NoError(t, json.Unmarshal(raw, &s))
	assert.Equal(t, "#/definitions/Box", s.Ref)
	box := s.Definitions["Box"]
	assert.Equal(t, "Box holds things.", box.Description)
	assert.Equal(t, []string{"name"}, box.Required, "omitempty fields are optional")
	assert.JSONEq(t, `{"type": "string", "description": "Name names the box.", "pattern": "^[a-z]+$"}`, string(box.Properties["name"]))
	assert.JSONEq(t, `{"type": "array", "items": {"type": "string", "minLength": 1}}`, string(box.Properties["tags"]))
	assert.JSONEq(t, `{}`, string(box.Properties["any"]))
	assert.Equal(t, []string{"color"}, s.Definitions["Lid"].Required, "+required overrides omitempty")
}

func TestGenerateRefusesUnknownMarkers(t *testing.T) {
	_, err := generate(t, strings.Replace(boxSource, "Enum=small;large", "Maximum=3", 1))
	assert.ErrorContains(t, err, `Box.Size: unknown marker "+kubebuilder:validation:Maximum=3"`)
}

func TestValidateSaysWhereAndWhat(t *testing.T) {
	raw, err := generate(t, boxSource)
	require.NoError(t, err)
	v, err := jsonschema.Compile(raw)
	require.NoError(t, err)
	doc := func(s string) any {
		var x any
		require.NoError(t, json.Unmarshal([]byte(s), &x))
		return x
	}
	assert.Empty(t, v.Validate(doc(`{"name": "a", "size": "large", "lid": {"color": "red"}, "any": [1, "x"]}`)))
	var got []string
	for _, err := range v.Validate(doc(`{"name": "A", "size": "huge", "tags": [""], "lid": {"colour": "red"}, "extra": 1}`)) {
		got = append(got, err.Error())
	}
	assert.Equal(t, []string{
		`lid.color: required field missing`,
		`lid: unknown field "colour"`,
		`name: "A" does not match ^[a-z]+$ (Name names the box.)`,
		`size: "huge": want small or large`,
		`tags[0]: should be at least 1 chars long`,
		`unknown field "extra"`,
	}, got)
}
