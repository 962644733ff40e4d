package checks

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/labctl/labctl/internal/labs"
	"github.com/labctl/labctl/internal/report"
)

func init() {
	Register(Typed(Definition{
		Name:       "unchanged",
		Doc:        "a recorded object's field, once set, never took another value (a generated password is not regenerated on every reconcile)",
		Namespaced: true,
	}, runUnchanged))
}

type unchangedParams struct {
	Ref  labs.Ref `json:"ref"`
	Path string   `json:"path"`
	// Secret hides the values in the evidence (passwords).
	Secret bool `json:"secret,omitempty"`
}

func (p *unchangedParams) Validate() error {
	if p.Ref.IsZero() || p.Path == "" {
		return errors.New("needs ref and path")
	}
	_, err := labs.ParsePath(p.Path)
	return err
}

func runUnchanged(ctx context.Context, c *Context, p *unchangedParams) Outcome {
	states, err := c.History(ctx, p.Ref)
	if err != nil {
		return errorf("%v", err)
	}
	path, _ := labs.ParsePath(p.Path)
	var values []string
	for _, st := range states {
		if st.Object == nil {
			continue
		}
		v, ok := lookup(st.Object.Object, path)
		if !ok {
			continue
		}
		s := fmt.Sprint(v)
		if len(values) == 0 || values[len(values)-1] != s {
			values = append(values, s)
		}
	}
	show := func(vs []string) string {
		if p.Secret {
			return fmt.Sprintf("%d different values", len(vs))
		}
		return strings.Join(vs, " → ")
	}
	switch {
	case len(values) == 0:
		return Outcome{Status: report.Fail, Message: fmt.Sprintf("%s never had %s (%d states recorded)", p.Ref, p.Path, len(states)),
			Expected: p.Path + " set once and kept"}
	case len(values) > 1:
		return Outcome{Status: report.Fail,
			Message:  fmt.Sprintf("%s of %s changed %d time(s) during the run: %s", p.Path, p.Ref, len(values)-1, show(values)),
			Expected: p.Path + " set once and kept", Observed: show(values)}
	}
	return pass("%s of %s kept its value through %d recorded state(s)", p.Path, p.Ref, len(states))
}
