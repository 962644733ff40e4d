package labs

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"

	"sigs.k8s.io/yaml"

	"github.com/labctl/labctl/internal/jsonschema"
	labsfs "github.com/labctl/labctl/labs"
)

// SchemaFile is where the lab format's JSON Schema is, from the repository's
// root: lab files name it for editors.
const SchemaFile = "labs/schema/lab.v1alpha1.json"

// GenerateSchema writes the lab format's JSON Schema from Lab and the doc
// comments and markers in srcDir (this package's source): the types' doc
// comments become its descriptions, their markers (lines starting with +)
// its constraints. `make generate` writes it to SchemaFile, which editors
// read and Parse checks every lab with; what a schema cannot say (one
// field given another) is Validate's.
func GenerateSchema(srcDir string) ([]byte, error) {
	return jsonschema.Generate(reflect.TypeFor[Lab](), jsonschema.Options{
		Title:  "labctl lab (" + APIVersion + ")",
		SrcDir: srcDir,
	})
}

// schemaValidator is the embedded schema, compiled once.
var schemaValidator = sync.OnceValues(func() (*jsonschema.Validator, error) {
	return jsonschema.Compile(labsfs.Schema)
})

// decode reads a lab file: its header first, so that a file of another
// version is refused for that reason alone, then the schema, then the
// fields into a Lab.
func decode(data []byte) (*Lab, error) {
	doc, err := yaml.YAMLToJSONStrict(data) // strict: a key given twice is an error
	if err != nil {
		return nil, err
	}
	var header struct {
		APIVersion any `json:"apiVersion"`
		Kind       any `json:"kind"`
	}
	_ = json.Unmarshal(doc, &header) // a document that is no object fails the schema below
	switch {
	case header.APIVersion == nil:
		return nil, fmt.Errorf("no apiVersion: a lab file starts with apiVersion: %s and kind: %s", APIVersion, KindLab)
	case header.APIVersion != APIVersion:
		return nil, fmt.Errorf("apiVersion %q unknown; this labctl reads %s — upgrade labctl, or write the lab for %s", fmt.Sprint(header.APIVersion), APIVersion, APIVersion)
	case header.Kind == nil:
		return nil, fmt.Errorf("no kind: a lab file has kind: %s after its apiVersion", KindLab)
	case header.Kind != KindLab:
		return nil, fmt.Errorf("kind %q: a lab file has kind: %s", fmt.Sprint(header.Kind), KindLab)
	}
	var tree any
	if err := json.Unmarshal(doc, &tree); err != nil {
		return nil, err
	}
	v, err := schemaValidator()
	if err != nil {
		return nil, err
	}
	if errs := v.Validate(tree); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	lab := &Lab{}
	dec := json.NewDecoder(strings.NewReader(string(doc)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(lab); err != nil {
		return nil, err
	}
	return lab, nil
}
