package checks

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/labctl/labctl/internal/cluster"
	"github.com/labctl/labctl/internal/labs"
	"github.com/labctl/labctl/internal/report"
)

// AuditEvent is the part of an audit.k8s.io/v1 Event the checks read
// (policy level Metadata).
type AuditEvent struct {
	AuditID          string          `json:"auditID"`
	Stage            string          `json:"stage"`
	Verb             string          `json:"verb"`
	RequestURI       string          `json:"requestURI"`
	User             auditUser       `json:"user"`
	ImpersonatedUser *auditUser      `json:"impersonatedUser,omitempty"`
	ObjectRef        *AuditObjectRef `json:"objectRef,omitempty"`
	ResponseStatus   *struct {
		Code int `json:"code"`
		// Message says why a request was refused (an admission
		// policy's message).
		Message string `json:"message,omitempty"`
	} `json:"responseStatus,omitempty"`
	// RequestObject is the request's body, for the requests the policy
	// records at level Request (updates of StatefulSets).
	RequestObject            json.RawMessage `json:"requestObject,omitempty"`
	RequestReceivedTimestamp time.Time       `json:"requestReceivedTimestamp"`
	StageTimestamp           time.Time       `json:"stageTimestamp"`
}

// AuditObjectRef is the object a request was about.
type AuditObjectRef struct {
	Resource    string `json:"resource"`
	Namespace   string `json:"namespace"`
	Name        string `json:"name"`
	APIGroup    string `json:"apiGroup"`
	APIVersion  string `json:"apiVersion"`
	Subresource string `json:"subresource"`
}

type auditUser struct {
	Username string `json:"username"`
}

// By reports whether the request was made by identity: directly (a pod's
// token, or the ServiceAccount token the local provider gives a manager)
// or impersonated (clusters whose managers still impersonate).
func (e *AuditEvent) By(identity string) bool {
	if e.ImpersonatedUser != nil && e.ImpersonatedUser.Username != "" {
		return e.ImpersonatedUser.Username == identity
	}
	return e.User.Username == identity
}

// Code is the response code (0 when unknown).
func (e *AuditEvent) Code() int {
	if e.ResponseStatus == nil {
		return 0
	}
	return e.ResponseStatus.Code
}

// On reports whether the request was about the named object.
func (e *AuditEvent) On(gvr schema.GroupVersionResource, namespace, name string) bool {
	o := e.ObjectRef
	return o != nil && o.Resource == gvr.Resource && o.APIGroup == gvr.Group && o.Namespace == namespace && o.Name == name
}

func (e *AuditEvent) subresource() string {
	if e.ObjectRef == nil {
		return ""
	}
	return e.ObjectRef.Subresource
}

// method is the HTTP method behind a verb, as people know them.
func method(verb string) string {
	switch verb {
	case "update":
		return "PUT"
	case "patch":
		return "PATCH"
	case "create":
		return "POST"
	case "delete":
		return "DELETE"
	}
	return strings.ToUpper(verb)
}

// auditSize is the audit log's current size: records before it belong to
// earlier runs.
func auditSize(ctx context.Context, env cluster.Env) int64 {
	if env.AuditLog == nil {
		return 0
	}
	rc, err := env.AuditLog(ctx)
	if err != nil {
		return 0
	}
	defer rc.Close()
	if f, ok := rc.(*os.File); ok {
		if st, err := f.Stat(); err == nil {
			return st.Size()
		}
	}
	n, _ := io.Copy(io.Discard, rc)
	return n
}

// ReadAudit parses the audit log from offset (from the start when the log
// was rotated and is now shorter).
func ReadAudit(ctx context.Context, env cluster.Env, offset int64) ([]AuditEvent, error) {
	if env.AuditLog == nil {
		return nil, errNoAudit
	}
	rc, err := env.AuditLog(ctx)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	var rd io.Reader = rc
	if s, ok := rc.(io.Seeker); ok {
		size, err := s.Seek(0, io.SeekEnd)
		if err != nil {
			return nil, err
		}
		if offset > size {
			offset = 0
		}
		if _, err := s.Seek(offset, io.SeekStart); err != nil {
			return nil, err
		}
	} else if offset > 0 {
		if _, err := io.CopyN(io.Discard, rc, offset); err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
	}
	return parseAudit(rd)
}

func parseAudit(rd io.Reader) ([]AuditEvent, error) {
	sc := bufio.NewScanner(rd)
	sc.Buffer(make([]byte, 0, 256*1024), 8*1024*1024)
	var out []AuditEvent
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 || line[0] != '{' {
			continue
		}
		var ev AuditEvent
		if json.Unmarshal(line, &ev) != nil {
			continue // a partly written last line
		}
		if ev.Stage != "" && ev.Stage != "ResponseComplete" && ev.Stage != "Panic" {
			continue
		}
		out = append(out, ev)
	}
	return out, sc.Err()
}

var errNoAudit = errors.New("no audit log")

// auditSyncPrefix begins the name of the object syncAudit asks for.
const auditSyncPrefix = "labctl-audit-sync-"

// auditSyncUser is the user labctl's own requests are made as: the one
// who asked for the last sync marker.
func auditSyncUser(evs []AuditEvent) string {
	for i := len(evs) - 1; i >= 0; i-- {
		if o := evs[i].ObjectRef; o != nil && strings.HasPrefix(o.Name, auditSyncPrefix) {
			return evs[i].User.Username
		}
	}
	return ""
}

// syncAudit makes sure every request made so far is in the audit log (the
// API server writes it in batches) and returns the run's records: it sends
// a request that is sure to be audited and reads until that one shows up.
func (c *Context) syncAudit(ctx context.Context) ([]AuditEvent, error) {
	env := c.Env()
	if env.AuditLog == nil {
		return nil, errNoAudit
	}
	marker := auditSyncPrefix + randomSuffix(8)
	_ = c.Client().Get(ctx, types.NamespacedName{Namespace: c.auditNamespace(), Name: marker}, &corev1.ConfigMap{})
	bound := max(c.Timeout, 10*time.Second)
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		evs, err := ReadAudit(ctx, env, c.run.auditOffset)
		if err != nil {
			return nil, err
		}
		for _, ev := range evs {
			if ev.ObjectRef != nil && ev.ObjectRef.Name == marker {
				return evs, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("the audit log did not record labctl's own request within %s: is the API server writing %s?", bound, "its audit log")
		case <-tick.C:
		}
	}
}

func (c *Context) auditNamespace() string {
	if ns := c.Namespace(); ns != "" {
		return ns
	}
	return "default"
}

// auditPreconditions returns a non-empty outcome when audit checks cannot
// run here.
func (c *Context) auditPreconditions() (Outcome, bool) {
	if c.Env().AuditLog == nil {
		return skip("this cluster has no API audit log labctl can read (an existing cluster?), so how the operator wrote cannot be seen"), false
	}
	if op := c.Operator(); op == nil || op.Identity == "" {
		return skip("the operator's identity is unknown (no operator deployed by labctl), so its requests cannot be told apart"), false
	}
	return Outcome{}, true
}

type auditWritesParams struct {
	// Ref is the object whose writes are examined.
	Ref labs.Ref `json:"ref"`
	// Since is a mark: writes from then on count.
	Since string `json:"since"`
	// Want is the verb the operator should use: patch.
	Want string `json:"want"`
}

func (p *auditWritesParams) Validate() error {
	if p.Ref.IsZero() || p.Since == "" {
		return errors.New("needs ref and since")
	}
	if p.Want != "patch" && p.Want != "update" {
		return errors.New("want is patch or update")
	}
	return nil
}

func init() {
	Register(Typed(Definition{
		Name:       "audit-writes",
		Doc:        "the operator changed an object with the wanted verb (PATCH, not PUT), from the API audit log",
		Namespaced: true,
	}, runAuditWrites))
	Register(Typed(Definition{
		Name:       "provoke-conflict",
		Doc:        "write a StatefulSet between the operator's read and its update; the audit log must show a 409 followed by a successful retry",
		Namespaced: true,
	}, runProvokeConflict))
}

func runAuditWrites(ctx context.Context, c *Context, p *auditWritesParams) Outcome {
	if out, ok := c.auditPreconditions(); !ok {
		return out
	}
	since, ok := c.Mark(p.Since)
	if !ok {
		return errorf("mark %q was not set by an earlier step", p.Since)
	}
	gvr, err := c.Resolve(p.Ref)
	if err != nil {
		return errorf("%v", err)
	}
	evs, err := c.syncAudit(ctx)
	if err != nil {
		return errorf("reading the audit log: %v", err)
	}
	id := c.Operator().Identity
	var writes []AuditEvent
	for _, ev := range evs {
		if ev.By(id) && ev.On(gvr, c.Namespace(), p.Ref.Name) && (ev.Verb == "update" || ev.Verb == "patch") &&
			(ev.subresource() == "" || ev.subresource() == "scale") && !ev.RequestReceivedTimestamp.Before(since) {
			writes = append(writes, ev)
		}
	}
	out := Outcome{Related: []string{p.Ref.Name}}
	count := map[string]int{}
	for _, w := range writes {
		key := method(w.Verb)
		if c := w.Code(); c < 200 || c > 299 {
			key += " " + strconv.Itoa(c)
		}
		count[key]++
	}
	observed := describeCounts(count)
	wantM, otherVerb := method(p.Want), "update"
	if p.Want == "update" {
		otherVerb = "patch"
	}
	out.Expected = fmt.Sprintf("%s by %s on %s", wantM, id, p.Ref)
	out.Observed = observed
	okWanted, other := 0, 0
	for _, w := range writes {
		switch {
		case w.Verb == p.Want && w.Code() >= 200 && w.Code() < 300:
			okWanted++
		case w.Verb == otherVerb:
			other++
		}
	}
	switch {
	case len(writes) == 0:
		out.Status = report.Fail
		out.Message = fmt.Sprintf("the audit log shows no write by the operator (%s) to %s since the change", id, p.Ref)
	case other > 0:
		out.Status = report.Fail
		out.Message = fmt.Sprintf("the operator changed %s with %s (%s), not %s", p.Ref, method(otherVerb), observed, wantM)
	case okWanted == 0:
		out.Status = report.Fail
		out.Message = fmt.Sprintf("none of the operator's writes to %s succeeded (%s)", p.Ref, observed)
	default:
		out.Status = report.Pass
		out.Message = fmt.Sprintf("the operator changed %s with %s only (%s)", p.Ref, wantM, observed)
	}
	return out
}

func describeCounts(m map[string]int) string {
	if len(m) == 0 {
		return "no writes"
	}
	var parts []string
	for _, k := range []string{"PATCH", "PUT"} {
		if n := m[k]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s ×%d", k, n))
		}
		delete(m, k)
	}
	for k, n := range m {
		parts = append(parts, fmt.Sprintf("%s ×%d", k, n))
	}
	return strings.Join(parts, ", ")
}
