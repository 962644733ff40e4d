// Host ports: which to publish for ingress, and whether one is taken.

package kind

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/labctl/labctl/internal/engine"
	"github.com/labctl/labctl/internal/freeport"
	"github.com/labctl/labctl/internal/iostreams"
)

// ingressPorts are the host ports for the node's 80 and 443: the course's
// 80 and 443, or 8080 and 8443 when a rootless engine may not publish
// privileged ports, or none when those are taken; the user is told which.
func (p *Provider) ingressPorts(e *engine.Engine, f *engine.Facts, s *iostreams.IOStreams) (int, int) {
	warn := s.Styles().Warning.Render("!")
	http, https := 80, 443
	if f.Rootless {
		if start := p.unprivilegedPortStart(); start > http {
			http, https = 8080, 8443
			fmt.Fprintf(s.ErrOut, "%s rootless %s cannot publish ports below %d (net.ipv4.ip_unprivileged_port_start): the cluster's ingress is on http://localhost:%d and https://localhost:%d instead of 80/443; `sudo sysctl net.ipv4.ip_unprivileged_port_start=80` and `labctl reset --cluster` give you 80/443\n",
				warn, e.Name, start, http, https)
		}
	}
	for _, port := range []int{http, https} {
		if p.portInUse(port) {
			fmt.Fprintf(s.ErrOut, "%s port %d is in use on this machine: creating the cluster without the course's ingress port mapping (%d/%d); free the port and run `labctl reset --cluster` to get it\n",
				warn, port, http, https)
			return 0, 0
		}
	}
	return http, https
}

func (p *Provider) unprivilegedPortStart() int {
	if p.UnprivilegedPortStart != nil {
		return p.UnprivilegedPortStart()
	}
	return UnprivilegedPortStart()
}

// UnprivilegedPortStart reads net.ipv4.ip_unprivileged_port_start (1024,
// the kernel's default, when it cannot be read).
func UnprivilegedPortStart() int {
	raw, err := os.ReadFile("/proc/sys/net/ipv4/ip_unprivileged_port_start")
	if err != nil {
		return 1024
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		return 1024
	}
	return n
}

func (p *Provider) portInUse(port int) bool {
	if p.PortInUse != nil {
		return p.PortInUse(port)
	}
	return PortInUse(port)
}

// PortInUse reports whether the host TCP port is taken for kind, which
// publishes on ListenAddress (all addresses): a listener on any address
// blocks it, not only one on 127.0.0.1.
func PortInUse(port int) bool { return freeport.InUse(ListenAddress, port) }
