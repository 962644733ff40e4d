package sandbox

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A sandboxed command must not create user namespaces: in a new one it
// holds every capability (over that namespace's objects, but the kernel's
// user-namespace code is a classic path to root). The namespaces the
// sandbox gives it are all it needs, so a seccomp filter, installed just
// before the exec, makes
//
//   - unshare and clone with CLONE_NEWUSER fail with EPERM,
//   - clone3 fail with ENOSYS: its flags sit in a struct that a filter
//     cannot read, and ENOSYS is what glibc and Go take as "old kernel"
//     and fall back to clone, whose flags the filter sees,
//   - every system call of another architecture (i386 through int 0x80,
//     x32) fail with EPERM: their numbers mean other calls.
//
// The filter is inherited by everything the command starts and cannot be
// removed (no_new_privs is set before it).

// System call numbers the filter inspects, per architecture: constants
// here rather than unix.SYS_*, which hold only the build's own.
type archCalls struct {
	audit                  uint32
	unshare, clone, clone3 uint32
}

var filterArches = []archCalls{
	{audit: unix.AUDIT_ARCH_X86_64, unshare: 272, clone: 56, clone3: 435},
	{audit: unix.AUDIT_ARCH_AARCH64, unshare: 97, clone: 220, clone3: 435},
}

// x32SyscallBit marks the x32 ABI's calls on x86_64 (same audit arch).
const x32SyscallBit = 0x40000000

// Offsets in struct seccomp_data: nr, arch, then args[6] (64-bit each;
// the low half of args[0] comes first on both little-endian arches).
const (
	offNr    = 0
	offArch  = 4
	offArg0  = 16
	retAllow = unix.SECCOMP_RET_ALLOW
	retEPERM = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	retNOSYS = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
)

// noUserNamespaces is the filter's program (classic BPF).
func noUserNamespaces() []unix.SockFilter {
	stmt := func(code uint16, k uint32) unix.SockFilter { return unix.SockFilter{Code: code, K: k} }
	jump := func(code uint16, k uint32, jt, jf uint8) unix.SockFilter {
		return unix.SockFilter{Code: code, Jt: jt, Jf: jf, K: k}
	}
	const (
		ld   = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq  = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		jge  = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
		jset = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
		ret  = unix.BPF_RET | unix.BPF_K
	)
	// The architecture picks a block of 10 instructions (the numbered
	// comments are offsets in it); a foreign one is refused at once.
	var prog []unix.SockFilter
	prog = append(prog, stmt(ld, offArch))
	// Dispatch: one jeq per architecture, then "foreign: EPERM".
	n := len(filterArches)
	const block = 10
	for i, a := range filterArches {
		// Past the dispatch's other jeqs and its return, then i blocks.
		jt := uint8(n - i + i*block)
		prog = append(prog, jump(jeq, a.audit, jt, 0))
	}
	prog = append(prog, stmt(ret, retEPERM))
	for _, a := range filterArches {
		prog = append(prog,
			stmt(ld, offNr),                      // 0
			jump(jge, x32SyscallBit, 6, 0),       // 1: -> 8 EPERM
			jump(jeq, a.clone3, 6, 0),            // 2: -> 9 ENOSYS
			jump(jeq, a.unshare, 1, 0),           // 3: -> 5
			jump(jeq, a.clone, 0, 2),             // 4: -> 5, else -> 7 allow
			stmt(ld, offArg0),                    // 5
			jump(jset, unix.CLONE_NEWUSER, 1, 0), // 6: -> 8 EPERM, else 7
			stmt(ret, retAllow),                  // 7
			stmt(ret, retEPERM),                  // 8
			stmt(ret, retNOSYS),                  // 9
		)
	}
	return prog
}

// denyUserNamespaces installs the filter on the calling thread (the one
// that executes the command: the caller locks it). no_new_privs must be
// set, as the kernel requires of an unprivileged process.
func denyUserNamespaces() error {
	prog := noUserNamespaces()
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if err := unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&fprog)), 0, 0); err != nil {
		return fmt.Errorf("install the seccomp filter: %w", err)
	}
	return nil
}
