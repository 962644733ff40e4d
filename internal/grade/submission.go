package grade

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/labctl/labctl/internal/userr"
)

// Submission is one student's project.
type Submission struct {
	// Student names the gradebook row and the feedback file.
	Student string
	// Dir is a kubebuilder project directory; or
	Dir string
	// Repo is a git URL (or a repository path) cloned at Ref (default
	// branch when empty).
	Repo string
	Ref  string
}

// Source describes where the submission comes from, for the gradebook.
func (s Submission) Source() string {
	if s.Repo == "" {
		return s.Dir
	}
	if s.Ref == "" {
		return s.Repo
	}
	return s.Repo + "@" + s.Ref
}

var studentPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@+-]{0,99}$`)

// ValidStudent checks a student id: it names a file (feedback/<id>.md)
// and a gradebook row.
func ValidStudent(id string) error {
	if !studentPattern.MatchString(id) {
		return fmt.Errorf("invalid student id %q: use up to 100 letters, digits and . _ @ + -, starting with a letter or digit", id)
	}
	return nil
}

// studentFromDir derives a student id from a directory's name.
func studentFromDir(dir string) string {
	base := filepath.Base(filepath.Clean(dir))
	id := regexp.MustCompile(`[^A-Za-z0-9._@+-]+`).ReplaceAllString(base, "-")
	id = strings.TrimLeft(id, "._@+-")
	if len(id) > 100 {
		id = id[:100]
	}
	return id
}

// Roster columns, by header name (case-insensitive). A GitHub Classroom
// roster export has "identifier","github_username","github_id","name".
var rosterColumns = map[string]string{
	"student": "student", "id": "student", "student_id": "student", "login": "student",
	"dir": "dir", "path": "dir", "directory": "dir",
	"repo": "repo", "url": "repo", "git": "repo", "repository": "repo",
	"ref": "ref", "branch": "ref", "commit": "ref", "tag": "ref",
	"github_username": "github", "github": "github",
	"identifier": "identifier",
}

// Classroom names the repositories of a GitHub Classroom assignment, which
// Classroom creates as ORG/PREFIX-USERNAME.
type Classroom struct {
	Org        string
	Assignment string
}

var (
	githubNamePattern = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})$`)
	githubRepoPattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,100}$`)
)

// Validate checks the organisation and the prefix: they become a URL.
func (c Classroom) Validate() error {
	if !githubNamePattern.MatchString(c.Org) {
		return fmt.Errorf("invalid GitHub organisation %q", c.Org)
	}
	if !githubRepoPattern.MatchString(c.Assignment) {
		return fmt.Errorf("invalid assignment prefix %q: use the start of the students' repository names, before -USERNAME", c.Assignment)
	}
	return nil
}

// RepoURL is a student's repository of the assignment.
func (c Classroom) RepoURL(username string) string {
	return "https://github.com/" + c.Org + "/" + c.Assignment + "-" + username
}

// RosterOptions say how to read a roster.
type RosterOptions struct {
	// BaseDir is the roster's directory: relative dirs and repository paths
	// are relative to it.
	BaseDir string
	// Classroom maps the github_username column of a GitHub Classroom
	// roster export to each student's repository.
	Classroom *Classroom
}

// ParseRoster reads a roster CSV: a header row naming the columns
// student, and dir or repo (with an optional ref); one row per student.
// A row sets a directory or a git repository. Relative directories (and
// repository paths) are relative to baseDir, the roster's directory.
// Empty lines and lines starting with # are skipped.
func ParseRoster(r io.Reader, baseDir string) ([]Submission, error) {
	subs, _, err := ParseRosterWith(r, RosterOptions{BaseDir: baseDir})
	return subs, err
}

// ParseRosterWith is ParseRoster that also reads a GitHub Classroom roster
// export: with o.Classroom, a github_username column (and no dir or repo
// column) names each student and their repository; the student id is the
// username unless a student column sets it. Entries not linked to a GitHub
// account have no repository: they are returned in unlinked (by
// identifier), not graded.
func ParseRosterWith(r io.Reader, o RosterOptions) (subs []Submission, unlinked []string, err error) {
	raw, err := io.ReadAll(r)
	if err != nil {
		return nil, nil, err
	}
	var lines []string
	for _, l := range strings.Split(strings.ReplaceAll(string(raw), "\r\n", "\n"), "\n") {
		if t := strings.TrimSpace(l); t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		lines = append(lines, l)
	}
	cr := csv.NewReader(strings.NewReader(strings.Join(lines, "\n")))
	cr.FieldsPerRecord = -1
	cr.TrimLeadingSpace = true
	records, err := cr.ReadAll()
	if err != nil {
		return nil, nil, fmt.Errorf("roster: %w", err)
	}
	if len(records) == 0 {
		return nil, nil, errors.New("roster: empty")
	}
	col := map[string]int{}
	for i, h := range records[0] {
		h = strings.ToLower(strings.TrimSpace(strings.TrimPrefix(h, "\ufeff")))
		if name, ok := rosterColumns[h]; ok {
			if _, dup := col[name]; dup {
				return nil, nil, fmt.Errorf("roster: header names the %s column twice", name)
			}
			col[name] = i
		}
	}
	_, hasStudent := col["student"]
	_, hasGitHub := col["github"]
	if !hasStudent && !hasGitHub {
		return nil, nil, fmt.Errorf("roster: the first row must be a header with a student column and a dir or repo column (got %q)", strings.Join(records[0], ","))
	}
	_, hasDir := col["dir"]
	_, hasRepo := col["repo"]
	classroom := hasGitHub && !hasDir && !hasRepo
	switch {
	case classroom && o.Classroom == nil:
		return nil, nil, errors.New("roster: a GitHub Classroom roster names no repositories: pass --classroom-org ORG --assignment PREFIX (repositories ORG/PREFIX-USERNAME)")
	case classroom:
		if err := o.Classroom.Validate(); err != nil {
			return nil, nil, err
		}
	case !hasStudent:
		return nil, nil, errors.New("roster: the header needs a student column beside dir or repo")
	case !hasDir && !hasRepo:
		return nil, nil, errors.New("roster: the header needs a dir (or path) column or a repo (or url) column")
	}
	get := func(rec []string, name string) string {
		if i, ok := col[name]; ok && i < len(rec) {
			return strings.TrimSpace(rec[i])
		}
		return ""
	}
	seen := map[string]int{}
	for n, rec := range records[1:] {
		line := n + 2
		s := Submission{Student: get(rec, "student"), Dir: get(rec, "dir"), Repo: get(rec, "repo"), Ref: get(rec, "ref")}
		if classroom {
			user := get(rec, "github")
			if user == "" {
				who := get(rec, "identifier")
				if who == "" {
					who = s.Student
				}
				if who == "" {
					who = fmt.Sprintf("row %d", line)
				}
				unlinked = append(unlinked, who)
				continue
			}
			if !githubNamePattern.MatchString(user) {
				return nil, nil, fmt.Errorf("roster row %d: %q is not a GitHub username", line, user)
			}
			if s.Student == "" {
				s.Student = user
			}
			s.Repo = o.Classroom.RepoURL(user)
		}
		if err := ValidStudent(s.Student); err != nil {
			return nil, nil, fmt.Errorf("roster row %d: %w", line, err)
		}
		if prev, dup := seen[s.Student]; dup {
			return nil, nil, fmt.Errorf("roster row %d: student %s is already on row %d", line, s.Student, prev)
		}
		seen[s.Student] = line
		if strings.HasPrefix(s.Repo, "-") || strings.HasPrefix(s.Ref, "-") {
			return nil, nil, fmt.Errorf("roster row %d: a repo or ref may not start with '-'", line)
		}
		switch {
		case s.Dir != "" && s.Repo != "":
			return nil, nil, fmt.Errorf("roster row %d: set a dir or a repo for %s, not both", line, s.Student)
		case s.Dir == "" && s.Repo == "":
			return nil, nil, fmt.Errorf("roster row %d: no dir or repo for %s", line, s.Student)
		case s.Dir != "":
			if s.Ref != "" {
				return nil, nil, fmt.Errorf("roster row %d: a ref needs a repo, %s has a dir", line, s.Student)
			}
			if !filepath.IsAbs(s.Dir) {
				s.Dir = filepath.Join(o.BaseDir, s.Dir)
			}
		case isLocalPath(s.Repo) && !filepath.IsAbs(s.Repo):
			s.Repo = filepath.Join(o.BaseDir, s.Repo)
		}
		subs = append(subs, s)
	}
	return subs, unlinked, nil
}

// ParseRepoList reads a list of student repositories, one git URL (or
// repository path) per line, as GitHub Classroom lists an assignment's
// repositories; empty lines and lines starting with # are skipped. The
// student id is the repository's name without the assignment prefix
// ("PREFIX-", when assignment is set), made a valid id as directory names
// are. Relative paths are relative to baseDir.
func ParseRepoList(r io.Reader, assignment, baseDir string) ([]Submission, error) {
	raw, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	var subs []Submission
	seen := map[string]int{}
	for n, l := range strings.Split(strings.ReplaceAll(string(raw), "\r\n", "\n"), "\n") {
		line, repo := n+1, strings.TrimSpace(l)
		if repo == "" || strings.HasPrefix(repo, "#") {
			continue
		}
		if strings.HasPrefix(repo, "-") || strings.ContainsAny(repo, " \t") {
			return nil, fmt.Errorf("repository list line %d: %q is not a repository URL", line, repo)
		}
		name := strings.TrimSuffix(strings.TrimRight(repo, "/"), ".git")
		name = name[strings.LastIndexAny(name, "/:")+1:]
		if assignment != "" {
			prefix := assignment + "-"
			if len(name) <= len(prefix) || !strings.EqualFold(name[:len(prefix)], prefix) {
				return nil, fmt.Errorf("repository list line %d: %s is not a repository of assignment %s (named %sUSERNAME)", line, name, assignment, prefix)
			}
			name = name[len(prefix):]
		}
		id := studentFromDir(name)
		if err := ValidStudent(id); err != nil {
			return nil, fmt.Errorf("repository list line %d: %w", line, err)
		}
		if prev, dup := seen[id]; dup {
			return nil, fmt.Errorf("repository list line %d: student %s is already on line %d", line, id, prev)
		}
		seen[id] = line
		if isLocalPath(repo) && !filepath.IsAbs(repo) {
			repo = filepath.Join(baseDir, repo)
		}
		subs = append(subs, Submission{Student: id, Repo: repo})
	}
	if len(subs) == 0 {
		return nil, errors.New("repository list: no repositories")
	}
	return subs, nil
}

// isLocalPath: not a URL (scheme:// or scp-like user@host:path).
func isLocalPath(repo string) bool {
	if strings.Contains(repo, "://") {
		return false
	}
	if i := strings.Index(repo, ":"); i > 0 && !strings.Contains(repo[:i], "/") {
		return false
	}
	return true
}

// Select resolves the command line: without a roster every argument is a
// project directory (the student id is its name); with one, arguments
// name students of the roster (or directories to add), and none means the
// whole roster.
func Select(args []string, roster []Submission) ([]Submission, error) {
	byID := map[string]Submission{}
	for _, s := range roster {
		byID[s.Student] = s
	}
	var out []Submission
	if len(args) == 0 {
		out = append(out, roster...)
	}
	seen := map[string]string{}
	for _, s := range out {
		seen[s.Student] = s.Source()
	}
	for _, a := range args {
		if s, ok := byID[a]; ok && roster != nil {
			if _, dup := seen[a]; !dup {
				out = append(out, s)
				seen[a] = s.Source()
			}
			continue
		}
		info, err := os.Stat(a)
		if err != nil || !info.IsDir() {
			if roster != nil {
				return nil, userr.Usage(fmt.Sprintf("%s is neither a student of the roster nor a directory", a), "name roster students by id, or give project directories")
			}
			return nil, userr.Usage(fmt.Sprintf("%s is not a directory", a), "give kubebuilder project directories, or --roster roster.csv")
		}
		abs, _ := filepath.Abs(a)
		id := studentFromDir(abs)
		if err := ValidStudent(id); err != nil {
			return nil, userr.Usage(fmt.Sprintf("cannot name a student after directory %s: %v", a, err), "use a roster (--roster) to set student ids")
		}
		if prev, dup := seen[id]; dup {
			return nil, userr.Usage(fmt.Sprintf("two submissions are named %s (%s and %s)", id, prev, abs), "use a roster (--roster) to set distinct student ids")
		}
		seen[id] = abs
		out = append(out, Submission{Student: id, Dir: abs})
	}
	if len(out) == 0 {
		return nil, userr.Usage("no submissions to grade", "give project directories, or --roster roster.csv")
	}
	return out, nil
}

// clone checks out a submission's repository into dst and returns the
// commit. git never prompts (a private repository fails instead of
// waiting for a password).
func clone(ctx context.Context, gitCmd string, s Submission, dst string) (string, error) {
	if gitCmd == "" {
		gitCmd = "git"
	}
	if _, err := exec.LookPath(gitCmd); err != nil {
		return "", userr.Env("git is needed to clone submissions from repositories", "install git, or give directories in the roster")
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	run := func(dir string, args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, gitCmd, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "GIT_ASKPASS=", "SSH_ASKPASS=", "GCM_INTERACTIVE=never",
			"GIT_SSH_COMMAND=ssh -oBatchMode=yes")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		if err != nil {
			msg := strings.TrimSpace(out.String())
			if i := strings.LastIndex(msg, "\n"); i >= 0 {
				msg = msg[i+1:]
			}
			return "", fmt.Errorf("git %s: %s", args[0], msg)
		}
		return strings.TrimSpace(out.String()), nil
	}
	if s.Ref == "" {
		if _, err := run("", "clone", "--quiet", "--depth=1", "--", s.Repo, dst); err != nil {
			return "", err
		}
	} else {
		// A ref may be a branch, a tag or a commit: clone, then check out.
		if _, err := run("", "clone", "--quiet", "--no-checkout", "--", s.Repo, dst); err != nil {
			return "", err
		}
		// A branch other than the default one exists as origin/<ref>.
		sha, err := run(dst, "rev-parse", "--verify", "--quiet", s.Ref+"^{commit}")
		if err != nil {
			if sha, err = run(dst, "rev-parse", "--verify", "--quiet", "origin/"+s.Ref+"^{commit}"); err != nil {
				return "", fmt.Errorf("the repository has no branch, tag or commit %s", s.Ref)
			}
		}
		if _, err := run(dst, "checkout", "--quiet", "--detach", sha); err != nil {
			return "", err
		}
	}
	commit, err := run(dst, "rev-parse", "HEAD")
	if err != nil {
		return "", err
	}
	return commit, stampContentTimes(dst)
}

// stampContentTimes sets each checked-out file's modification time from its
// content. A checkout's times are the moment of the clone, so without this
// every clone of the same commit would look like new sources and be built
// again (labctl caches managers by a fingerprint of paths, sizes and
// times); with it, grading a commit again reuses its manager.
func stampContentTimes(dir string) error {
	base := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		raw, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(raw)
		at := base.Add(time.Duration(binary.BigEndian.Uint64(sum[:8])%(20*365*24*3600)) * time.Second)
		return os.Chtimes(p, at, at)
	})
}
