package checks

import (
	"context"
	"errors"
	"fmt"
	"go/parser"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/labctl/labctl/internal/report"
)

func init() {
	Register(Typed(Definition{
		Name: "rbac-marker",
		Doc:  "the package of a reconciler (any file, as controller-gen reads it) has a +kubebuilder:rbac marker granting verbs on a resource",
	}, runRBACMarker))
}

type rbacMarkerParams struct {
	// Reconciler is the type whose package (the package of its Reconcile
	// method) must carry the marker (DatabaseReconciler).
	Reconciler string `json:"reconciler"`
	Group      string `json:"group"`
	// Groups, instead of Group, are alternatives: a marker granting the
	// verbs in any one of them will do (as the rbac check's groups).
	Groups   []string `json:"groups,omitempty"`
	Resource string   `json:"resource"`
	Verbs    []string `json:"verbs"`
}

func (p *rbacMarkerParams) Validate() error {
	if p.Reconciler == "" || p.Resource == "" || len(p.Verbs) == 0 {
		return errors.New("needs reconciler, resource and verbs")
	}
	if p.Group != "" && len(p.Groups) > 0 {
		return errors.New("group and groups are alternatives: set one")
	}
	return nil
}

// groups are the API groups a marker may grant the verbs in, each an
// alternative.
func (p *rbacMarkerParams) groups() []string {
	if len(p.Groups) > 0 {
		return p.Groups
	}
	return []string{p.Group}
}

// grantedBy reports whether m grants the verbs in one of the groups.
func (p *rbacMarkerParams) grantedBy(m rbacMarker) bool {
	for _, g := range p.groups() {
		if m.grants(g, p.Resource, p.Verbs) {
			return true
		}
	}
	return false
}

// rbacMarker is one +kubebuilder:rbac line: groups, resources and verbs
// (each ;-separated in the source).
type rbacMarker struct {
	groups, resources, verbs []string
	at                       string
}

func parseRBACMarker(text string) (rbacMarker, bool) {
	body, ok := strings.CutPrefix(strings.TrimSpace(text), "+kubebuilder:rbac:")
	if !ok {
		return rbacMarker{}, false
	}
	var m rbacMarker
	for _, kv := range strings.Split(body, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(kv), "=")
		vals := strings.Split(strings.Trim(v, `"`), ";")
		switch k {
		case "groups":
			m.groups = vals
		case "resources":
			m.resources = vals
		case "verbs":
			m.verbs = vals
		}
	}
	return m, true
}

// grants reports whether the marker grants every verb on group/resource
// (kubebuilder writes the core group as "core" or "").
func (m rbacMarker) grants(group, resource string, verbs []string) bool {
	groupOK := slices.Contains(m.groups, group) || slices.Contains(m.groups, "*") ||
		(group == "" && slices.Contains(m.groups, "core"))
	if !groupOK || !(slices.Contains(m.resources, resource) || slices.Contains(m.resources, "*")) {
		return false
	}
	for _, v := range verbs {
		if !slices.Contains(m.verbs, v) && !slices.Contains(m.verbs, "*") {
			return false
		}
	}
	return true
}

// runRBACMarker reads the markers of the reconciler's package, every file
// of it: controller-gen collects +kubebuilder:rbac markers from the whole
// package, so a marker beside the reconciler struct in another file than
// Reconcile (where lab 8.2 puts it once module 4 moved Reconcile into the
// state-machine file, catalogue B33) grants exactly as much as one beside
// Reconcile. The check still reads markers rather than the ClusterRole: a
// rule edited into config/rbac/role.yaml by hand is gone at the next make
// manifests.
func runRBACMarker(_ context.Context, c *Context, p *rbacMarkerParams) Outcome {
	proj, out, ok := c.project()
	if !ok {
		return out
	}
	var file *goFile
	for _, fn := range proj.funcs {
		if strings.TrimPrefix(fn.recv, "*") == p.Reconciler && fn.name == "Reconcile" {
			file = fn.file
			break
		}
	}
	want := fmt.Sprintf("+kubebuilder:rbac:groups=%s,resources=%s,verbs=%s", markerGroup(p.groups()[0]), p.Resource, strings.Join(p.Verbs, ";"))
	if len(p.Groups) > 1 {
		want += " (or groups=" + strings.Join(p.Groups[1:], " or ") + ")"
	}
	if file == nil {
		return Outcome{Status: report.Fail, Message: fmt.Sprintf("no Reconcile method of %s was found in the project", p.Reconciler),
			Expected: want + " in the package of (" + p.Reconciler + ").Reconcile"}
	}
	pkgDir := path.Dir(file.rel)
	// The project is parsed without comments: read the package's files again.
	var markers []rbacMarker
	for _, f := range proj.files {
		if path.Dir(f.rel) != pkgDir || f.ast.Name.Name != file.ast.Name.Name {
			continue
		}
		withComments, err := parser.ParseFile(proj.fset, filepath.Join(proj.dir, filepath.FromSlash(f.rel)), nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return errorf("reading %s: %v", f.rel, oneLine(err))
		}
		for _, cg := range withComments.Comments {
			for _, cm := range cg.List {
				text := strings.TrimPrefix(strings.TrimPrefix(cm.Text, "//"), "/*")
				if m, ok := parseRBACMarker(text); ok {
					m.at = proj.pos(cm)
					markers = append(markers, m)
				}
			}
		}
	}
	var onResource []string
	for _, m := range markers {
		if p.grantedBy(m) {
			return pass("the package of %s has the marker for %s (%s)", p.Reconciler, p.Resource, m.at)
		}
		if slices.Contains(m.resources, p.Resource) {
			onResource = append(onResource, fmt.Sprintf("%s: groups=%s verbs=%s", m.at, strings.Join(m.groups, ";"), strings.Join(m.verbs, ";")))
		}
	}
	observed := fmt.Sprintf("%d +kubebuilder:rbac marker(s) in %s/, none for %s", len(markers), pkgDir, p.Resource)
	if len(onResource) > 0 {
		observed = "markers for " + p.Resource + " without every verb: " + strings.Join(onResource, "; ")
	}
	why := "make manifests generates the operator's ClusterRole from these markers"
	if m, verb, ok := commentInVerb(markers, p); ok {
		// Lab 6.4's own marker ends in "// <-- ADD THIS LINE": controller-gen
		// reads to the end of the line, so the comment becomes part of the
		// last verb and that verb is never granted.
		why = fmt.Sprintf("the marker at %s ends in a comment, which controller-gen reads as part of its last verb (%q, which grants nothing): put the comment on a line of its own", m.at, verb)
	}
	return Outcome{Status: report.Fail,
		Message:  fmt.Sprintf("no +kubebuilder:rbac marker in %s/ (the package of %s) grants %s on %s: %s", pkgDir, p.Reconciler, strings.Join(p.Verbs, ", "), p.Resource, why),
		Expected: want + " in any file of " + pkgDir + "/ (beside the " + p.Reconciler + " struct, as the lab shows), then make manifests",
		Observed: observed}
}

// markerGroup is a group as a marker spells it: the core group is "core".
func markerGroup(group string) string {
	if group == "" {
		return "core"
	}
	return group
}

// commentInVerb finds a marker for the resource whose verbs would grant
// what is asked but for a trailing "//" comment read into a verb.
func commentInVerb(markers []rbacMarker, p *rbacMarkerParams) (rbacMarker, string, bool) {
	for _, m := range markers {
		for i, v := range m.verbs {
			before, _, cut := strings.Cut(v, "//")
			if !cut {
				continue
			}
			fixed := m
			fixed.verbs = slices.Clone(m.verbs)
			fixed.verbs[i] = strings.TrimSpace(before)
			if p.grantedBy(fixed) {
				return m, v, true
			}
		}
	}
	return rbacMarker{}, "", false
}
