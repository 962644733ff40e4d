package labs

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Ref names an object in the run's namespace: "kind/name", with kind one of
// the lab's kinds or the built-in ones.
type Ref struct {
	Kind string
	Name string
}

func (r Ref) String() string {
	if r.Kind == "" {
		return ""
	}
	return r.Kind + "/" + r.Name
}

// IsZero reports whether the ref is unset.
func (r Ref) IsZero() bool { return r.Kind == "" && r.Name == "" }

// UnmarshalJSON reads "kind/name" ("" is the zero ref MarshalJSON
// writes for an unset one).
func (r *Ref) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a ref is a string kind/name: %w", err)
	}
	if s == "" {
		*r = Ref{}
		return nil
	}
	kind, name, ok := strings.Cut(s, "/")
	if !ok || kind == "" || name == "" {
		return fmt.Errorf("ref %q: want kind/name", s)
	}
	r.Kind, r.Name = strings.ToLower(kind), name
	return nil
}

// MarshalJSON writes "kind/name".
func (r Ref) MarshalJSON() ([]byte, error) { return json.Marshal(r.String()) }

// JSONSchema is the schema of a ref in a lab file (internal/jsonschema).
func (Ref) JSONSchema() map[string]any {
	return map[string]any{"type": "string", "pattern": `^[A-Za-z0-9.-]+/.+$`}
}

// Text is a string in English and Russian: a lab gives both.
type Text struct {
	// +required
	// +kubebuilder:validation:MinLength=1
	EN string `json:"en,omitempty"`
	// +required
	// +kubebuilder:validation:MinLength=1
	RU string `json:"ru,omitempty"`
}

// In returns the text in lang ("ru" or anything else for English), falling
// back to English.
func (t Text) In(lang string) string {
	if lang == "ru" && t.RU != "" {
		return t.RU
	}
	return t.EN
}

// IsZero reports whether both languages are empty.
func (t Text) IsZero() bool { return t.EN == "" && t.RU == "" }

// Timeout is a duration that differs by cluster profile: "local" (pods
// simulated, everything fast) or "kind" (real pods, images to pull; also
// used for existing clusters). A plain duration sets both.
type Timeout struct {
	Local time.Duration
	Kind  time.Duration
}

// Profiles of Timeout.
const (
	ProfileLocal = "local"
	ProfileKind  = "kind"
)

// For returns the duration for a profile.
func (t Timeout) For(profile string) time.Duration {
	if profile == ProfileLocal {
		return t.Local
	}
	return t.Kind
}

// IsZero reports whether no duration is set.
func (t Timeout) IsZero() bool { return t.Local == 0 && t.Kind == 0 }

// UnmarshalJSON reads "5s" or {local: 5s, kind: 2m}.
func (t *Timeout) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		d, err := time.ParseDuration(s)
		if err != nil {
			return err
		}
		t.Local, t.Kind = d, d
		return nil
	}
	var m struct {
		Local string `json:"local"`
		Kind  string `json:"kind"`
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return fmt.Errorf("a timeout is a duration or {local: D, kind: D}: %w", err)
	}
	var err error
	if m.Local != "" {
		if t.Local, err = time.ParseDuration(m.Local); err != nil {
			return err
		}
	}
	if m.Kind != "" {
		if t.Kind, err = time.ParseDuration(m.Kind); err != nil {
			return err
		}
	}
	if m.Local == "" {
		t.Local = t.Kind
	}
	if m.Kind == "" {
		t.Kind = t.Local
	}
	return nil
}

// MarshalJSON writes {local, kind}.
func (t Timeout) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string]string{"local": t.Local.String(), "kind": t.Kind.String()})
}

// JSONSchema is the schema of a timeout in a lab file (internal/jsonschema).
func (Timeout) JSONSchema() map[string]any {
	duration := map[string]any{"type": "string", "pattern": durationPattern, "description": "A Go duration: 500ms, 6s, 3m, 1m30s."}
	return map[string]any{"anyOf": []any{
		duration,
		map[string]any{
			"type":                 "object",
			"properties":           map[string]any{ProfileLocal: duration, ProfileKind: duration},
			"additionalProperties": false,
			"minProperties":        1,
		},
	}}
}

// durationPattern is what time.ParseDuration reads, less signs.
const durationPattern = `^([0-9]+(\.[0-9]*)?(ns|us|µs|ms|s|m|h))+$`
