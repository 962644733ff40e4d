// Package cgrouptest holds, for tests only, the attacks a box's limits
// must stop: the student's code of the cgroup and grading-sandbox tests.
package cgrouptest

import (
	"fmt"
	"os"
	"os/exec"
)

// Attack runs the attack named mode and never returns: "forkbomb" starts
// processes until the system refuses one (and says how many it got),
// then waits; "hog" takes memory 16 MiB at a time, touching every page,
// and says how much it holds after each step, until it is killed. Any
// other mode exits 2.
func Attack(mode string) {
	switch mode {
	case "forkbomb":
		n := 0
		for {
			if err := exec.Command("sleep", "600").Start(); err != nil {
				fmt.Printf("forked %d, then: %v\n", n, err)
				break
			}
			n++
		}
		select {}
	case "hog":
		var keep [][]byte
		for i := 0; ; i++ {
			b := make([]byte, 16<<20)
			for j := 0; j < len(b); j += 4096 {
				b[j] = 1
			}
			keep = append(keep, b)
			fmt.Printf("holding %d MiB\n", (i+1)*16)
		}
	}
	os.Exit(2)
}
