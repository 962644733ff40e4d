// Package labs is the model of a lab definition (labs/*.yaml): the tasks,
// numbered as in the lab text, and the scenarios whose steps drive the
// cluster and assert what each task asks for. The vocabulary is small and
// declarative, after kyverno/chainsaw: apply, patch, delete, expect (with
// eventually, consistently, recreated, absent) and check, which calls a
// check written in Go (internal/checks) with parameters from the YAML.
package labs

import (
	"encoding/json"
	"regexp"
	"strings"
)

// APIVersion and KindLab head every lab file: the version of the format
// this labctl reads. A change that old files would fail on (a field renamed
// or made required) is a new version.
const (
	APIVersion = "labctl.dev/v1alpha1"
	KindLab    = "Lab"
)

// Lab is one lab of the course: a file labs/<id>.yaml.
type Lab struct {
	// APIVersion is the version of the lab format: labctl.dev/v1alpha1.
	// +kubebuilder:validation:Enum=labctl.dev/v1alpha1
	APIVersion string `json:"apiVersion"`
	// Kind is Lab.
	// +kubebuilder:validation:Enum=Lab
	Kind string `json:"kind"`
	// ID is the lab's name on the command line: lab-3.4.
	// +kubebuilder:validation:Pattern=`^lab-[0-9]+\.[0-9]+$`
	ID string `json:"id"`
	// Title is the lab's title, as in the lab text.
	Title Text `json:"title"`
	// Module is the course module the lab belongs to.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Module int `json:"module"`
	// Source names the lab text in the course repository.
	Source string `json:"source,omitempty"`
	// Project names the reference project the lab builds on (its answer,
	// and the operator labctl deploys for it): "" or postgres for the
	// Database operator, hello for the Hello World operator, website for
	// lab 1.4's CRD, which has no operator (internal/reference).
	Project string `json:"project,omitempty"`
	// Operatorless says the lab judges the project's files and its own
	// tests, not a running operator (lab 6.2: the student's envtest suite):
	// up, verify and grade neither build nor deploy the operator for it.
	// +optional
	Operatorless bool `json:"operatorless,omitempty"`
	// Kinds maps the short names used in refs (database) to
	// group/version/Kind (database.example.com/v1/Database), on top of the
	// built-in ones (statefulset, service, secret, ...).
	//
	// Kinds are also what `labctl reset` deletes: every object of a lab's
	// own kind (any lab's, across the cluster or a namespace), then
	// whatever garbage collection removes because it owned it. Its
	// children need no declaration: reset finds them by their owner
	// references, in every resource the API server lists.
	// +kubebuilder:validation:items:Pattern=`^([a-z0-9.-]+/)?v[0-9a-z]+/[A-Z][A-Za-z0-9]*$`
	Kinds map[string]string `json:"kinds,omitempty"`
	// Reset says what `labctl reset` cannot learn from Kinds alone.
	Reset Reset `json:"reset,omitzero"`
	// Defaults are the timeouts of steps that do not set their own.
	// +required
	Defaults Defaults `json:"defaults,omitempty"`
	// Bindings hold what the lab writes once and uses in several steps,
	// as YAML anchors (`test-db: &test-db {...}`, then `spec: *test-db`).
	// The loader resolves them; the engine never reads this field.
	Bindings map[string]any `json:"bindings,omitempty"`
	// Tasks are the lab text's numbered tasks, each worth points.
	// +kubebuilder:validation:MinItems=1
	Tasks []Task `json:"tasks"`
	// Scenarios run in parallel, each in the run's namespace with its own
	// objects; then those marked alone, one at a time; then the lab's
	// cleanup scenario; then those marked final.
	// +kubebuilder:validation:MinItems=1
	Scenarios []Scenario `json:"scenarios"`
}

// Reset is what `labctl reset` needs to know of a lab beyond its Kinds.
// Reset runs over every lab at once (it takes no lab argument), so each
// lab declares only what its text introduces: lab 8.2 the order of its
// Backup and Database, the first Database lab the leftovers of the
// Database operator.
type Reset struct {
	// Order lists kinds (keys of Kinds) that must be deleted before the
	// lab's other kinds, first to last: a kind that refers to another
	// goes before it (a Backup before its Database, so that the Backup
	// controller never sees its Database vanish). Kinds named in any
	// lab's order go first, in that order; the rest follow by name.
	Order []string `json:"order,omitempty"`
	// Leftovers describe what the lab's operator creates that reset should
	// recognise when no owner reference ties it to a lab object any
	// more (a student's controller that never set one, or a Database
	// deleted with --cascade=orphan). Reset lists them, and deletes them
	// only under --force.
	Leftovers []Leftover `json:"leftovers,omitempty"`
}

// Leftover matches objects of one kind; every field set must hold.
type Leftover struct {
	// Kind is a short kind name (the lab's or a built-in one).
	Kind string `json:"kind"`
	// Selects are labels the object selects: a workload's
	// spec.selector.matchLabels or a Service's spec.selector.
	Selects map[string]string `json:"selects,omitempty"`
	// Labels are labels the object carries.
	Labels map[string]string `json:"labels,omitempty"`
	// NameSuffix ends the object's name (-credentials).
	NameSuffix string `json:"nameSuffix,omitempty"`
	// DataKeys are keys of the object's data (a Secret's or ConfigMap's).
	DataKeys []string `json:"dataKeys,omitempty"`
}

// Defaults are the timeouts of steps that do not set their own.
type Defaults struct {
	// Timeout bounds expect and check steps.
	// +required
	Timeout Timeout `json:"timeout,omitempty"`
	// For is how long "consistently" watches.
	// +required
	For Timeout `json:"for,omitempty"`
	// Progress is how every wait for the operator (eventually, recreated,
	// absent) follows its progress past its timeout; without it labctl's
	// own idle and each (local 5s and 2s, kind 30s and 20s) apply.
	Progress *Progress `json:"progress,omitempty"`
}

// Task is one numbered task of the lab text (or "cleanup").
type Task struct {
	// ID is the task's number in the lab text (1.2), or cleanup.
	// +kubebuilder:validation:Pattern=`^([0-9]+\.[0-9]+|cleanup)$`
	ID string `json:"id"`
	// Points are what the task is worth (a lab's add up to 100).
	// +kubebuilder:validation:Minimum=0
	Points int  `json:"points"`
	Title  Text `json:"title"`
	// Hint tells a student who failed the task where to look.
	Hint Text `json:"hint"`
	// Hidden tasks are graded but their evidence is withheld from students.
	Hidden bool `json:"hidden,omitempty"`
}

// Scenario is a sequence of steps run in order.
type Scenario struct {
	// Name is unique in the lab: lowercase letters, digits and dashes.
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$`
	Name  string `json:"name"`
	Title Text   `json:"title,omitempty"`
	// Final scenarios run after all others have finished, the cleanup
	// included (operator health over the whole run).
	Final bool `json:"final,omitempty"`
	// Alone scenarios load the cluster (a writer in a tight loop): they run
	// one at a time after the parallel ones, so that they do not starve
	// the timed steps of the others.
	Alone bool `json:"alone,omitempty"`
	// Cleanup marks the lab's own cleanup (it deletes what the others
	// made); it runs last, and not at all with --keep, whose point is to
	// leave the objects for inspection.
	Cleanup bool `json:"cleanup,omitempty"`
	// Record watches these objects from the scenario's start and keeps
	// every state they pass through, for checks about order (a Backup must
	// not start before its Database is Ready).
	Record []Ref `json:"record,omitempty"`
	// +kubebuilder:validation:MinItems=1
	Steps []Step `json:"steps"`
}

// Step is one operation. Exactly one of Apply, Patch, Delete, Wait, Expect
// and Check is set. Expect and Check steps are assertions: they have an ID and
// name the tasks they give evidence for.
type Step struct {
	// ID names an assertion (expect and check steps need one): unique in
	// the lab, lowercase letters, digits and dashes.
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`
	ID string `json:"id,omitempty"`
	// Tasks are the IDs of the tasks an assertion gives evidence for.
	Tasks []string `json:"tasks,omitempty"`
	// Title says what an assertion checks (assertions need one).
	Title Text `json:"title,omitempty"`
	// Severity "warn" turns a failure into a warning: for what the course's
	// solution files add beyond the lab text.
	// +kubebuilder:validation:Enum=warn
	Severity string `json:"severity,omitempty"`
	// Bug names the course's own bug (course catalogue §5, e.g. B1) this
	// step probes: a grading policy can make all such steps strict.
	Bug string `json:"bug,omitempty"`
	// Hidden steps count as usual, but a student's feedback withholds
	// their evidence (set by a grading policy).
	Hidden bool `json:"hidden,omitempty"`
	// Why a warning (severity warn): said with it instead of the default
	// (the lab text does not require it, the course's solution files do).
	Why *Text `json:"why,omitempty"`
	// Gate stops the scenario when this assertion does not pass: the steps
	// after it are reported as skipped ("not run: gate <task> <title>
	// failed") instead of cascading; they neither earn nor cost. So a gate
	// asserts only what the steps after it stand on: anything else its task
	// asks goes in a check of its own after it, which a mistake there
	// fails alone.
	Gate bool `json:"gate,omitempty"`
	// Mark records the time just before the step runs, for later checks
	// (e.g. audit records since the mark).
	Mark string `json:"mark,omitempty"`
	// Meanwhile runs this assertion alongside the one before it (both
	// start together) instead of after it: for properties watched over the
	// same window, such as two objects that must both stay put.
	Meanwhile bool `json:"meanwhile,omitempty"`
	// Timeout bounds this step instead of the lab's defaults.timeout.
	Timeout *Timeout `json:"timeout,omitempty"`

	Apply  *Apply  `json:"apply,omitempty"`
	Patch  *Patch  `json:"patch,omitempty"`
	Delete *Delete `json:"delete,omitempty"`
	// Wait is an expect-eventually (or, with quiet, a wait for the object
	// to stop changing) that is no assertion of its own: it sets up the
	// assertions after it. When an eventually wait times out, the next
	// assertion fails with the wait's evidence and the rest of the
	// scenario is not run (a step never continues after its own timeout).
	Wait   *Expect  `json:"wait,omitempty"`
	Expect *Expect  `json:"expect,omitempty"`
	Check  *GoCheck `json:"check,omitempty"`
}

// Kind names the step's operation.
func (s *Step) Kind() string {
	switch {
	case s.Apply != nil:
		return "apply"
	case s.Patch != nil:
		return "patch"
	case s.Delete != nil:
		return "delete"
	case s.Wait != nil:
		return "wait"
	case s.Expect != nil:
		return "expect"
	case s.Check != nil:
		return "check"
	}
	return ""
}

// IsAssertion reports whether the step produces a check result.
func (s *Step) IsAssertion() bool { return s.Expect != nil || s.Check != nil }

// Apply creates or updates an object (server-side apply) in the run's
// namespace.
type Apply struct {
	Object map[string]any `json:"object"`
}

// Patch sends a JSON merge patch, like `kubectl patch --type merge`.
type Patch struct {
	Ref Ref `json:"ref"`
	// Merge is the patch.
	// +kubebuilder:validation:MinProperties=1
	Merge map[string]any `json:"merge"`
	// Subresource "status" patches the status subresource. Such a status
	// is the operator's to write: when a check after the patch fails and
	// the operator has written over a field the patch set, the check
	// could not run (it stood on that status) and costs nothing.
	// +kubebuilder:validation:Enum=status
	Subresource string `json:"subresource,omitempty"`
}

// Delete deletes one object (Ref), or every object of a kind (All), like
// `kubectl delete KIND --all`. The UID of a deleted object is remembered
// for a later `expect: recreated`.
type Delete struct {
	Ref Ref `json:"ref,omitempty"`
	// All is a kind: delete every object of it.
	All string `json:"all,omitempty"`
}

// Expect observes one object through a watch.
type Expect struct {
	Ref Ref `json:"ref"`
	// Eventually: wait until every assertion holds.
	Eventually []Assertion `json:"eventually,omitempty"`
	// Consistently: every assertion holds for the whole of For.
	Consistently []Assertion `json:"consistently,omitempty"`
	For          *Timeout    `json:"for,omitempty"`
	// Recreated: the object exists again with a UID other than the one a
	// previous delete step removed.
	Recreated bool `json:"recreated,omitempty"`
	// Absent: the object is gone.
	Absent bool `json:"absent,omitempty"`
	// Quiet (wait steps only): wait until the object has not changed for
	// this long, so that the operator has finished reacting to it.
	Quiet *Timeout `json:"quiet,omitempty"`
	// Progress overrides the lab's defaults.progress for this wait (not
	// for consistently, which is a window, not a wait).
	Progress *Progress `json:"progress,omitempty"`
	// OnTimeout "continue" (wait steps only) is for a wait whose later steps
	// do not need what it waited for (it only gives the operator a chance
	// to act first): on a timeout the scenario goes on, and the next
	// assertion carries the wait's evidence as a note. By default a
	// timed-out wait fails the assertion it sets up.
	// +kubebuilder:validation:Enum=continue
	OnTimeout string `json:"onTimeout,omitempty"`
	// Stuck (expect eventually only) names a course bug whose signature
	// is the object left in a state its operator never leaves: see Stuck.
	Stuck *Stuck `json:"stuck,omitempty"`
}

// Stuck is the signature of a course bug (course catalogue §5) that
// strikes in some runs only, such as B32: the Backup left InProgress
// because the operator's final status update conflicted. When the wait
// times out with the object as When says, and the audit log shows that
// the operator's last write of the object's status was refused with 409
// Conflict, the step is a warning with that evidence, and so are the
// failures of the scenario's later steps (they needed what it waited
// for): the grade is the same whether the race struck or not.
type Stuck struct {
	// Bug names the course bug (B32).
	Bug string `json:"bug"`
	// When is the state the bug leaves the object in.
	// +kubebuilder:validation:MinItems=1
	When []Assertion `json:"when"`
	// Why explains the warning to the student.
	Why Text `json:"why"`
}

// Progress keeps a wait for the operator going past its timeout while the
// operator is visibly working: some object in the run's namespace of the
// lab's kinds, or of a kind a step refers to (or Kind), was changed by
// someone other than labctl within the last Idle. One worker reconciles
// objects created together in turn, so what a step may take grows with how
// many there are: the wait ends at the latest after its timeout plus Each
// per object of the lab's kinds in the namespace. A pass still ends as
// soon as the assertions hold; only a failure takes longer. A wait for a
// deleted object to come back never takes more than 45s: an operator that
// does not watch it would bring it back at its next periodic requeue.
type Progress struct {
	// Kind is one more kind to follow.
	Kind string  `json:"kind,omitempty"`
	Idle Timeout `json:"idle"`
	Each Timeout `json:"each"`
}

// Mode says which of eventually/consistently/recreated/absent is set.
func (e *Expect) Mode() string {
	var modes []string
	if len(e.Eventually) > 0 {
		modes = append(modes, "eventually")
	}
	if len(e.Consistently) > 0 {
		modes = append(modes, "consistently")
	}
	if e.Recreated {
		modes = append(modes, "recreated")
	}
	if e.Absent {
		modes = append(modes, "absent")
	}
	return strings.Join(modes, "+")
}

// Assertion is one fact about an object. Path is dotted, with [key=value]
// to pick a list item: status.conditions[type=Ready].reason. Exactly one of
// Equals, NotEquals, EqualsPath, In, Exists, Matches, Has, Condition is set.
type Assertion struct {
	Path   string          `json:"path,omitempty"`
	Equals json.RawMessage `json:"equals,omitempty"`
	// Has is a partial object, as chainsaw's assert files are: every field
	// it gives holds at Path (the whole object when Path is empty). Maps
	// match as subsets; each item of a list must match its own item of the
	// observed list, in any order; anything else is equal as JSON.
	Has       json.RawMessage `json:"has,omitempty"`
	NotEquals json.RawMessage `json:"notEquals,omitempty"`
	// EqualsPath is another path of the same object whose value the one
	// at Path must equal (status.conditions[type=Ready].observedGeneration
	// equals metadata.generation, whatever the generation is).
	EqualsPath string `json:"equalsPath,omitempty"`
	In         []any  `json:"in,omitempty"`
	Exists     *bool  `json:"exists,omitempty"`
	// Matches is a regular expression the string at Path matches. In it,
	// $(NAMESPACE) stands for the object's own namespace, matched
	// literally: a run's namespace is fresh each time, and a value that
	// names it (an endpoint) must name that one, not any.
	Matches string `json:"matches,omitempty"`
	// Condition asserts a status condition (type, and status/reason when
	// given) without spelling out the paths.
	Condition *Condition `json:"condition,omitempty"`
}

// NamespaceVar in a Matches pattern stands for the object's namespace.
const NamespaceVar = "$(NAMESPACE)"

// MatchesPattern is a's Matches with NamespaceVar replaced by namespace
// (quoted, so it matches itself only).
func (a Assertion) MatchesPattern(namespace string) string {
	return strings.ReplaceAll(a.Matches, NamespaceVar, regexp.QuoteMeta(namespace))
}

// Condition is a metav1.Condition pattern.
type Condition struct {
	// +kubebuilder:validation:MinLength=1
	Type string `json:"type"`
	// +kubebuilder:validation:Enum=True;False;Unknown
	Status string `json:"status,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// GoCheck calls a check written in Go, registered under Name, with With as
// its parameters.
type GoCheck struct {
	// Name is the name a Go check is registered under (internal/checks).
	// +kubebuilder:validation:MinLength=1
	Name string          `json:"name"`
	With json.RawMessage `json:"with,omitempty"`
}
