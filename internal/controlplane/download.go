package controlplane

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// downloadAttempts bounds how often one file is asked for: a dropped
// connection resumes where it stopped (HTTP Range), a corrupt file starts
// again from zero.
const downloadAttempts = 5

// defaultIdleTimeout ends a transfer that sends nothing for this long (a
// half-open connection would otherwise hang `up` for ever).
const defaultIdleTimeout = 60 * time.Second

// downloadFailed is why the release binaries could not be used; Ensure then
// builds them instead. Its text is the first half of the one line saying so.
type downloadFailed struct{ reason string }

func (e *downloadFailed) Error() string { return e.reason }

// permanent marks an answer no retry will change (404, a missing checksum).
type permanent struct{ error }

func (p permanent) Unwrap() error { return p.error }

type downloader struct {
	mirror   string
	client   *http.Client
	pins     map[string]string
	idle     time.Duration
	progress func(format string, args ...any)
}

var (
	sharedClient     *http.Client
	sharedClientOnce sync.Once
)

// httpClient is the default transport with a bound on waiting for
// headers, and file:// for a mirror on a disk.
func httpClient() *http.Client {
	sharedClientOnce.Do(func() {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.ResponseHeaderTimeout = 30 * time.Second
		t.RegisterProtocol("file", http.NewFileTransport(http.Dir("/")))
		sharedClient = &http.Client{Transport: t}
	})
	return sharedClient
}

// download installs the official release binaries of opts.Versions into
// root/bin. A *downloadFailed error means building is the way left.
func download(ctx context.Context, opts Options, root string) error {
	goos, arch := opts.goos, opts.arch
	if goos == "" {
		goos, arch = runtime.GOOS, runtime.GOARCH
	}
	arts, err := ReleaseArtifacts(opts.Versions, goos, arch)
	if err != nil {
		return &downloadFailed{reason: err.Error()}
	}
	pins := opts.pins
	if pins == nil {
		pins = pinnedSHA256
	}
	d := &downloader{mirror: mirrorRoot(opts.Mirror), client: httpClient(), pins: pins, idle: opts.idleTimeout, progress: opts.Progress}
	return d.download(ctx, root, arts)
}

// download fetches every artifact into a fresh directory beside bin,
// verifies each against its pinned or published sha256 and only then
// swaps the directory in as bin: a failure at any point leaves nothing.
func (d *downloader) download(ctx context.Context, root string, arts []Artifact) error {
	// A labctl killed mid-download left its directory; we hold the lock,
	// so no one else is using one.
	if old, _ := filepath.Glob(filepath.Join(root, "download-*")); len(old) > 0 {
		for _, o := range old {
			_ = os.RemoveAll(o)
		}
	}
	tmp, err := os.MkdirTemp(root, "download-")
	if err != nil {
		return classify(err, "cannot write to the cache")
	}
	defer os.RemoveAll(tmp) // gone once renamed to bin
	for _, a := range arts {
		if err := d.artifact(ctx, tmp, a); err != nil {
			return err
		}
	}
	bin := filepath.Join(root, "bin")
	if err := os.RemoveAll(bin); err != nil {
		return classify(err, "cannot replace "+bin)
	}
	if err := os.Rename(tmp, bin); err != nil {
		return classify(err, "cannot install the control-plane binaries")
	}
	return nil
}

// artifact puts a's executable, verified, at dir/<component>.
func (d *downloader) artifact(ctx context.Context, dir string, a Artifact) error {
	name := a.Component + " " + a.Version
	want, err := d.checksum(ctx, a)
	if err != nil {
		return d.failed(ctx, name, a.Path, err)
	}
	file := filepath.Join(dir, path.Base(a.Path)+".part")
	// A corrupt transfer (a proxy's error page, flipped bits) is retried
	// once from zero; the same wrong bytes twice means the file is wrong.
	for try := 1; ; try++ {
		err = d.fetch(ctx, a, file)
		if err == nil {
			err = verify(file, want)
		}
		if err == nil {
			break
		}
		_ = os.Remove(file)
		var bad *checksumMismatch
		if !errors.As(err, &bad) || try == 2 {
			return d.failed(ctx, name, a.Path, err)
		}
	}
	exe := filepath.Join(dir, a.Component)
	if a.Member != "" {
		err = extract(file, a.Member, exe)
		_ = os.Remove(file)
	} else {
		err = os.Rename(file, exe)
	}
	if err != nil {
		return d.failed(ctx, name, a.Path, err)
	}
	return os.Chmod(exe, 0o755)
}

// failed turns err into the reason Ensure reports before building, keeping
// what the caller must see as such: an interrupt, a full disk.
func (d *downloader) failed(ctx context.Context, name, p string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if isDiskFull(err) {
		return classify(err, "downloading "+name)
	}
	return &downloadFailed{reason: fmt.Sprintf("download of %s failed (%s)", name, brief(err, hostOf(d.mirror+p)))}
}

// checksum is a's pin, else the checksum its release publishes.
func (d *downloader) checksum(ctx context.Context, a Artifact) (string, error) {
	if sum, ok := d.pins[a.Path]; ok {
		return sum, nil
	}
	var buf strings.Builder
	err := d.retry(ctx, func() error {
		buf.Reset()
		return d.get(ctx, d.mirror+a.SumPath, 0, &limitedWriter{w: &buf, n: 1 << 20}, nil)
	})
	if err != nil {
		var p permanent
		if errors.As(err, &p) {
			return "", permanent{fmt.Errorf("no sha256 pinned in labctl, and %s: %w", path.Base(a.SumPath), err)}
		}
		return "", fmt.Errorf("%s: %w", path.Base(a.SumPath), err)
	}
	sum, ok := parseSum(buf.String(), a.SumName)
	if !ok {
		return "", permanent{fmt.Errorf("%s lists no sha256 for it", path.Base(a.SumPath))}
	}
	return sum, nil
}

// fetch downloads a into file, resuming after a dropped connection.
func (d *downloader) fetch(ctx context.Context, a Artifact, file string) error {
	f, err := os.OpenFile(file, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	label := a.Component + " " + a.Version
	var shown time.Time
	d.report("downloading %s", label)
	err = d.retry(ctx, func() error {
		offset, err := f.Seek(0, io.SeekEnd)
		if err != nil {
			return err
		}
		return d.get(ctx, d.mirror+a.Path, offset, f, func(done, total int64) {
			// Once a second: with -v and no terminal, each update is a line.
			if time.Since(shown) < time.Second {
				return
			}
			shown = time.Now()
			if total > 0 {
				d.report("downloading %s: %d/%d MiB", label, done>>20, total>>20)
			} else {
				d.report("downloading %s: %d MiB", label, done>>20)
			}
		})
	})
	if err != nil {
		return err
	}
	// On disk before bin is renamed into place: a power cut must not
	// leave a verified name on unwritten bytes.
	return f.Sync()
}

// retry runs attempt up to downloadAttempts times, pausing a little longer
// each time, until it succeeds or fails in a way no retry changes.
func (d *downloader) retry(ctx context.Context, attempt func() error) error {
	var last error
	for n := 1; n <= downloadAttempts; n++ {
		if n > 1 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Duration(n-1) * 200 * time.Millisecond):
			}
		}
		last = attempt()
		var p permanent
		if last == nil || ctx.Err() != nil || isDiskFull(last) || errors.As(last, &p) {
			return last
		}
	}
	return last
}

// resumeRefused says the server answered a Range request with something
// other than the rest of the file; the next attempt starts from zero.
var resumeRefused = errors.New("the server refused to resume")

// get writes the body of rawURL to w, asking for the bytes from offset on
// when offset > 0. w is an *os.File when resuming is possible.
func (d *downloader) get(ctx context.Context, rawURL string, offset int64, w io.Writer, progress func(done, total int64)) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return permanent{err}
	}
	if offset > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", offset))
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	f, _ := w.(*os.File)
	switch {
	case resp.StatusCode == http.StatusPartialContent && offset > 0:
		if !strings.HasPrefix(resp.Header.Get("Content-Range"), fmt.Sprintf("bytes %d-", offset)) {
			return truncate(f, resumeRefused)
		}
	case resp.StatusCode == http.StatusOK:
		if offset > 0 {
			if err := truncate(f, nil); err != nil {
				return err
			}
			offset = 0
		}
	case resp.StatusCode == http.StatusRequestedRangeNotSatisfiable:
		return truncate(f, resumeRefused)
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone ||
		resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusUnauthorized:
		return permanent{fmt.Errorf("%s", resp.Status)}
	default:
		return fmt.Errorf("%s", resp.Status)
	}
	total := int64(-1)
	if resp.ContentLength >= 0 {
		total = offset + resp.ContentLength
	}
	idle := d.idle
	if idle <= 0 {
		idle = defaultIdleTimeout
	}
	watchdog := time.AfterFunc(idle, func() { cancel(errIdle) })
	defer watchdog.Stop()
	done := offset
	buf := make([]byte, 256<<10)
	for {
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			watchdog.Reset(idle)
			if _, err := w.Write(buf[:n]); err != nil {
				return err
			}
			done += int64(n)
			if progress != nil {
				progress(done, total)
			}
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			if errors.Is(context.Cause(ctx), errIdle) {
				return fmt.Errorf("no data for %s", idle)
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("connection dropped after %d of %s bytes: %w", done, sizeText(total), rerr)
		}
	}
}

// errIdle is the watchdog's cause for ending a silent transfer.
var errIdle = errors.New("idle")

var errNoSpace = syscall.ENOSPC

func sizeText(total int64) string {
	if total < 0 {
		return "unknown"
	}
	return fmt.Sprint(total)
}

func truncate(f *os.File, reason error) error {
	if f != nil {
		if err := f.Truncate(0); err != nil {
			return err
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return err
		}
	}
	return reason
}

func (d *downloader) report(format string, args ...any) {
	if d.progress != nil {
		d.progress(format, args...)
	}
}

type checksumMismatch struct{ want, got string }

func (e *checksumMismatch) Error() string {
	return fmt.Sprintf("sha256 %s…, expected %s…: a corrupt or substituted file, not kept", e.got[:12], e.want[:12])
}

func verify(file, want string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return &checksumMismatch{want: want, got: got}
	}
	return nil
}

// extract copies member of the .tar.gz archive to dst.
func extract(archive, member, dst string) error {
	f, err := os.Open(archive)
	if err != nil {
		return err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return fmt.Errorf("unpack %s: %w", filepath.Base(archive), err)
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return fmt.Errorf("%s holds no %s", strings.TrimSuffix(filepath.Base(archive), ".part"), member)
		}
		if err != nil {
			return fmt.Errorf("unpack %s: %w", filepath.Base(archive), err)
		}
		if path.Clean(h.Name) != member || h.Typeflag != tar.TypeReg {
			continue
		}
		out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, tr); err != nil {
			out.Close()
			return err
		}
		if err := out.Sync(); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	}
}

type limitedWriter struct {
	w io.Writer
	n int64
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > l.n {
		return 0, errors.New("checksum file too large")
	}
	l.n -= int64(len(p))
	return l.w.Write(p)
}

func isDiskFull(err error) bool {
	return err != nil && (errors.Is(err, errNoSpace) || strings.Contains(err.Error(), "no space left on device"))
}

// brief is err in a few words for the one line before building: "no
// route to dl.k8s.io", "404 Not Found", the checksum mismatch.
func brief(err error, host string) string {
	var dnsErr *net.DNSError
	var opErr *net.OpError
	var urlErr *url.Error
	switch {
	case errors.As(err, &dnsErr):
		return "no route to " + host + ": " + dnsErr.Err
	case errors.As(err, &opErr) && opErr.Op == "dial":
		return "no route to " + host + ": " + opErr.Err.Error()
	case errors.As(err, &urlErr):
		return host + ": " + urlErr.Err.Error()
	}
	return err.Error()
}

func hostOf(rawURL string) string {
	if u, err := url.Parse(rawURL); err == nil && u.Host != "" {
		return u.Host
	}
	return rawURL
}
