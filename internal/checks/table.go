package checks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/labctl/labctl/internal/labs"
	"github.com/labctl/labctl/internal/report"
)

func init() {
	Register(Typed(Definition{
		Name:       "table",
		Doc:        "`kubectl get KIND` shows the columns asked for (the API server's Table view, printer columns included) and, per named object, the cells asked for",
		Namespaced: true,
	}, runTable))
}

type tableParams struct {
	// Kind is a kind name of the lab (database).
	Kind string `json:"kind"`
	// Columns are the headers kubectl prints, in order: NAME, PHASE, ...
	Columns []string `json:"columns"`
	// Rows maps an object's name to the cells it must show, by header.
	Rows map[string]map[string]string `json:"rows,omitempty"`
}

func (p *tableParams) Validate() error {
	if p.Kind == "" || len(p.Columns) == 0 {
		return errors.New("needs kind and columns")
	}
	return nil
}

// tableAccept asks the API server for the Table kubectl renders (with the
// CRD's additionalPrinterColumns), not the objects.
const tableAccept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"

func runTable(ctx context.Context, c *Context, p *tableParams) Outcome {
	gvr, err := c.Resolve(labs.Ref{Kind: p.Kind})
	if err != nil {
		return errorf("the cluster does not serve %s (is its CRD installed?)", p.Kind)
	}
	cfg := rest.CopyConfig(c.Config())
	cfg.GroupVersion = &metav1.SchemeGroupVersion
	cfg.APIPath = "/apis"
	if gvr.Group == "" {
		cfg.APIPath = "/api"
	}
	cfg.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	rc, err := rest.UnversionedRESTClientFor(cfg)
	if err != nil {
		return errorf("table client: %v", err)
	}
	// path.Join drops the empty group of the core API.
	raw, err := rc.Get().AbsPath(cfg.APIPath, gvr.Group, gvr.Version, "namespaces", c.Namespace(), gvr.Resource).
		SetHeader("Accept", tableAccept).DoRaw(ctx)
	if err != nil {
		return errorf("kubectl get %s: %s", gvr.Resource, oneLine(err))
	}
	var table metav1.Table
	if err := json.Unmarshal(raw, &table); err != nil || table.Kind != "Table" {
		return errorf("kubectl get %s: the API server sent no Table", gvr.Resource)
	}
	// kubectl prints the headers upper-cased, without priority>0 columns
	// (those need -o wide).
	var headers []string
	var index []int
	for i, col := range table.ColumnDefinitions {
		if col.Priority == 0 {
			headers = append(headers, strings.ToUpper(col.Name))
			index = append(index, i)
		}
	}
	want := make([]string, len(p.Columns))
	for i, col := range p.Columns {
		want[i] = strings.ToUpper(col)
	}
	expected := "columns " + strings.Join(want, ", ")
	if !slices.Equal(headers, want) {
		return Outcome{Status: report.Fail,
			Message:  fmt.Sprintf("kubectl get %s shows the columns %s, not %s", gvr.Resource, strings.Join(headers, ", "), strings.Join(want, ", ")),
			Expected: expected, Observed: "columns " + strings.Join(headers, ", ")}
	}
	var problems, shown []string
	for _, name := range slices.Sorted(maps.Keys(p.Rows)) {
		cells, ok := rowCells(table, index, headers, name)
		if !ok {
			problems = append(problems, "no row for "+name)
			continue
		}
		var row []string
		for _, h := range slices.Sorted(maps.Keys(p.Rows[name])) {
			wantCell := p.Rows[name][h]
			got := cells[strings.ToUpper(h)]
			row = append(row, strings.ToUpper(h)+"="+got)
			if got != wantCell {
				problems = append(problems, fmt.Sprintf("%s shows %s %q, not %q", name, strings.ToUpper(h), got, wantCell))
			}
		}
		shown = append(shown, name+" ("+strings.Join(row, " ")+")")
	}
	if len(problems) > 0 {
		return Outcome{Status: report.Fail,
			Message:  fmt.Sprintf("kubectl get %s: %s", gvr.Resource, strings.Join(problems, "; ")),
			Expected: expected + " with the rows asked for", Observed: strings.Join(problems, "; ")}
	}
	msg := fmt.Sprintf("kubectl get %s shows %s", gvr.Resource, strings.Join(headers, ", "))
	if len(shown) > 0 {
		msg += "; " + strings.Join(shown, ", ")
	}
	return pass("%s", msg)
}

// rowCells returns the cells of the named object's row, by header.
func rowCells(t metav1.Table, index []int, headers []string, name string) (map[string]string, bool) {
	for _, row := range t.Rows {
		if len(row.Cells) == 0 || fmt.Sprint(row.Cells[0]) != name {
			continue
		}
		cells := map[string]string{}
		for i, h := range headers {
			if index[i] < len(row.Cells) {
				cells[h] = cellString(row.Cells[index[i]])
			}
		}
		return cells, true
	}
	return nil, false
}

// cellString prints a cell as kubectl does: numbers without a fraction,
// absent values as <none>.
func cellString(v any) string {
	switch x := v.(type) {
	case nil:
		return "<none>"
	case float64:
		if x == float64(int64(x)) {
			return fmt.Sprint(int64(x))
		}
	}
	return fmt.Sprint(v)
}
