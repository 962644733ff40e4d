package labs

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
)

// Next is the lab a user most likely does next on an operator built from
// project (a reference project's name; "" is the Database operator): the
// first lab of that project, in course order, that passed does not hold;
// when every one has passed, the last of them. Nil when no lab uses the
// project. Derived, so a new lab joins the path by its YAML alone.
func Next(all []*Lab, project string, passed []string) *Lab {
	project = canonicalProject(project)
	var last *Lab
	for _, l := range all { // all is in course order (Load sorts it)
		if canonicalProject(l.Project) != project {
			continue
		}
		if !slices.Contains(passed, l.ID) {
			return l
		}
		last = l
	}
	return last
}

// canonicalProject folds the Database operator's two spellings.
func canonicalProject(p string) string {
	if p == "postgres" {
		return ""
	}
	return p
}

// Passed is the record of the labs a user's `labctl verify` has passed
// in full, kept so hints can point at the next one.
type Passed struct{ path string }

// PassedIn keeps the record in dir (the user's labctl state directory).
func PassedIn(dir string) *Passed { return &Passed{path: filepath.Join(dir, "passed-labs.json")} }

// List returns the labs passed so far; none when nothing was recorded yet.
func (p *Passed) List() ([]string, error) {
	raw, err := os.ReadFile(p.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the passed labs: %w", err)
	}
	var ids []string
	if err := json.Unmarshal(raw, &ids); err != nil {
		return nil, fmt.Errorf("read the passed labs from %s: %w", p.path, err)
	}
	return ids, nil
}

// Add records that lab id passed. The file is replaced atomically, so a
// killed run leaves the previous record, never half of one.
func (p *Passed) Add(id string) error {
	ids, err := p.List()
	if err != nil {
		ids = nil // a corrupt record is rebuilt rather than blocking verify
	}
	if slices.Contains(ids, id) {
		return nil
	}
	ids = append(ids, id)
	slices.Sort(ids)
	raw, _ := json.Marshal(ids)
	if err := os.MkdirAll(filepath.Dir(p.path), 0o700); err != nil {
		return fmt.Errorf("record the passed lab: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(p.path), ".passed-labs-*")
	if err != nil {
		return fmt.Errorf("record the passed lab: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(raw); err != nil {
		tmp.Close()
		return fmt.Errorf("record the passed lab: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("record the passed lab: %w", err)
	}
	return os.Rename(tmp.Name(), p.path)
}
