// How many submissions run at once, and the limits each box runs under.

package grade

import (
	"fmt"
	"os"
	"runtime"
	"strings"

	"github.com/labctl/labctl/internal/supervise"
)

// DefaultJobs is what the machine can grade at once: a core and 512 MiB of
// available memory per submission, at least one.
func DefaultJobs() int {
	jobs := runtime.NumCPU()
	if avail := memAvailable(); avail > 0 {
		jobs = min(jobs, int(avail/perJobMemory))
	}
	return max(jobs, 1)
}

// memAvailable reads MemAvailable from /proc/meminfo (0 if unknown).
func memAvailable() uint64 { return meminfoBytes("MemAvailable:") }

// meminfoBytes reads one field of /proc/meminfo in bytes (0 if unknown).
func meminfoBytes(field string) uint64 {
	raw, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(l, field); ok {
			var kb uint64
			_, _ = fmt.Sscanf(strings.TrimSpace(rest), "%d", &kb)
			return kb * 1024
		}
	}
	return 0
}

func describeLimits(l supervise.Limits) string {
	var parts []string
	if l.CPU > 0 {
		parts = append(parts, fmt.Sprintf("CPU time %s", l.CPU))
	}
	if l.Memory > 0 {
		parts = append(parts, fmt.Sprintf("memory %dMiB (%s)", l.Memory>>20, supervise.MemoryMechanism()))
	}
	return strings.Join(parts, ", ")
}
