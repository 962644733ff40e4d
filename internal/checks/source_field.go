package checks

import (
	"fmt"

	"github.com/labctl/labctl/internal/report"
)

// fieldIndexedAndQueried asks that one given field is both indexed and
// queried: an index nobody lists by, or a query on another field, is not
// the index the lab asks for.
func fieldIndexedAndQueried(field string, indexed map[string]bool, uses []fieldKey) (Outcome, bool) {
	if !indexed[field] {
		return Outcome{Status: report.Fail,
			Message:  fmt.Sprintf("no index on %q is registered", field),
			Expected: fmt.Sprintf("mgr.GetFieldIndexer().IndexField(ctx, &Object{}, %q, extractor)", field),
			Observed: "no IndexField call with that key"}, false
	}
	for _, u := range uses {
		if u.value == field {
			return Outcome{}, true
		}
	}
	return Outcome{Status: report.Fail,
		Message:  fmt.Sprintf("%q is indexed but no List queries it with client.MatchingFields", field),
		Expected: fmt.Sprintf("a List with client.MatchingFields{%q: value}", field),
		Observed: "no such query"}, false
}
