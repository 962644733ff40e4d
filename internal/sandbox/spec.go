package sandbox

// EnvVar carries a Spec (JSON) to the helper process.
const EnvVar = "LABCTL_SANDBOX"

// SetupFailed is the helper's exit status when it could not set the
// sandbox up (the reason is on stderr, after "labctl sandbox:"): the
// command never ran.
const SetupFailed = 126

// Spec is what a sandboxed command is and sees.
type Spec struct {
	// UID and GID the command runs as (never 0).
	UID int `json:"uid"`
	GID int `json:"gid"`
	// Dir is the working directory (inside the sandbox's view).
	Dir string `json:"dir"`
	// Env is the command's whole environment: nothing of the caller's
	// is inherited.
	Env []string `json:"env"`
	// Hide lists directories covered with an empty tmpfs and files
	// covered with /dev/null, inside the sandbox's root (an allow-list:
	// see systemDirs); paths it does not hold are skipped.
	Hide []string `json:"hide,omitempty"`
	// Scratch lists directories replaced by an empty writable tmpfs
	// private to this sandbox (/tmp).
	Scratch []string `json:"scratch,omitempty"`
	// Binds make paths visible again after hiding (same or other place).
	Binds []Bind `json:"binds,omitempty"`
	// Overlays mount Lower read-only under a writable Upper at Dst.
	Overlays []Overlay `json:"overlays,omitempty"`
	// Nice, when positive, lowers the command's priority (the nice value
	// it and everything it starts inherit), so a build leaves the CPU to
	// a cluster under test.
	Nice int `json:"nice,omitempty"`
}

// Bind mounts Src at Dst, read-only unless Writable.
type Bind struct {
	Src      string `json:"src"`
	Dst      string `json:"dst"`
	Writable bool   `json:"writable,omitempty"`
}

// Overlay shares a directory (a build cache) without letting the sandbox
// change it: writes land in Upper. Work is overlayfs's work directory, on
// the same file system as Upper.
type Overlay struct {
	Lower string `json:"lower"`
	Upper string `json:"upper"`
	Work  string `json:"work"`
	Dst   string `json:"dst"`
}
