//go:build linux

package sandbox

import (
	"encoding/binary"
	"fmt"
	"testing"

	"golang.org/x/sys/unix"
)

// The kernel runs the filter for this machine's architecture only (see
// TestSandboxDeniesUserNamespaces); this walks the program, as the
// kernel's BPF interpreter would, for both architectures and a foreign
// one, so the arm64 block is checked on an x86_64 machine too.
func TestFilterVerdicts(t *testing.T) {
	prog := noUserNamespaces()
	const newuser, newns = unix.CLONE_NEWUSER, unix.CLONE_NEWNS
	for _, c := range []struct {
		arch    uint32
		nr      uint32
		arg0    uint64
		verdict uint32
	}{
		{unix.AUDIT_ARCH_X86_64, 272, newuser, retEPERM},        // unshare
		{unix.AUDIT_ARCH_X86_64, 272, newns, retAllow},          // unshare, mount ns
		{unix.AUDIT_ARCH_X86_64, 56, newuser | newns, retEPERM}, // clone
		{unix.AUDIT_ARCH_X86_64, 56, 0x3d0f00, retAllow},        // clone, a thread
		{unix.AUDIT_ARCH_X86_64, 435, 0, retNOSYS},              // clone3
		{unix.AUDIT_ARCH_X86_64, 0x40000000 | 272, 0, retEPERM}, // x32
		{unix.AUDIT_ARCH_X86_64, 59, newuser, retAllow},         // execve: arg0 is not flags
		{unix.AUDIT_ARCH_AARCH64, 97, newuser, retEPERM},        // unshare
		{unix.AUDIT_ARCH_AARCH64, 220, newuser, retEPERM},       // clone
		{unix.AUDIT_ARCH_AARCH64, 220, 0x3d0f00, retAllow},      // clone, a thread
		{unix.AUDIT_ARCH_AARCH64, 435, 0, retNOSYS},             // clone3
		{unix.AUDIT_ARCH_AARCH64, 272, newuser, retAllow},       // x86_64's unshare is arm64's something else
		{unix.AUDIT_ARCH_I386, 310, newuser, retEPERM},          // foreign
		{unix.AUDIT_ARCH_I386, 20, 0, retEPERM},                 // foreign getpid
	} {
		t.Run(fmt.Sprintf("%x/%d", c.arch, c.nr), func(t *testing.T) {
			data := make([]byte, 64)
			binary.LittleEndian.PutUint32(data[offNr:], c.nr)
			binary.LittleEndian.PutUint32(data[offArch:], c.arch)
			binary.LittleEndian.PutUint64(data[offArg0:], c.arg0)
			if got := runBPF(t, prog, data); got != c.verdict {
				t.Errorf("verdict %#x, want %#x", got, c.verdict)
			}
		})
	}
}

// runBPF interprets the few classic BPF instructions the filter uses.
func runBPF(t *testing.T, prog []unix.SockFilter, data []byte) uint32 {
	var acc uint32
	for pc := 0; pc < len(prog); pc++ {
		in := prog[pc]
		switch in.Code {
		case unix.BPF_LD | unix.BPF_W | unix.BPF_ABS:
			acc = binary.LittleEndian.Uint32(data[in.K:])
		case unix.BPF_RET | unix.BPF_K:
			return in.K
		case unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K, unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K:
			var yes bool
			switch in.Code & 0xf0 {
			case unix.BPF_JEQ:
				yes = acc == in.K
			case unix.BPF_JGE:
				yes = acc >= in.K
			case unix.BPF_JSET:
				yes = acc&in.K != 0
			}
			if yes {
				pc += int(in.Jt)
			} else {
				pc += int(in.Jf)
			}
		default:
			t.Fatalf("instruction %d: unexpected code %#x", pc, in.Code)
		}
	}
	t.Fatal("the program fell off its end")
	return 0
}
