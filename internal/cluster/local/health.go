// Whether a cluster's processes run and answer: reuse, status.

package local

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/labctl/labctl/internal/cluster"
	"github.com/labctl/labctl/internal/proc"
)

// healthy reports whether every component of st runs and the API answers.
func (p *Provider) healthy(ctx context.Context, dir string, st *state) bool {
	for _, c := range startOrder {
		if !st.alive(dir, c) {
			return false
		}
	}
	tlsCfg, err := adminTLS(layout{dir})
	if err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return waitHTTP(ctx, fmt.Sprintf("https://127.0.0.1:%d/readyz", st.Ports.APIServer), tlsCfg) == nil
}

// alive: the component's recorded process runs (same pid, same start
// time: pids are reused after a reboot).
func (st *state) alive(dir, component string) bool {
	if r, ok := st.Procs[component]; ok {
		return r.Alive()
	}
	return ownedAlive(dir, st.PIDs[component]) // a state written before records
}

// ownedAlive: pid runs and its command line names this cluster's
// directory (state files without records).
func ownedAlive(dir string, pid int) bool {
	if !proc.Alive(pid) {
		return false
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return err == nil && strings.Contains(string(raw), dir)
}

// Status implements cluster.Provider.
func (p *Provider) Status(ctx context.Context, name string) (*cluster.Health, error) {
	dir, st, err := p.existing(name)
	if err != nil {
		return nil, err
	}
	out := &cluster.Health{Name: name, Provider: ProviderName, Context: ContextName(name), Running: true}
	tlsCfg, _ := adminTLS(layout{dir})
	for _, c := range startOrder {
		pid := st.PIDs[c]
		comp := cluster.Component{Name: c, PID: pid, Healthy: st.alive(dir, c)}
		switch c {
		case "etcd":
			comp.Address = fmt.Sprintf("127.0.0.1:%d", st.Ports.Etcd)
		case "kube-apiserver":
			comp.Address = fmt.Sprintf("127.0.0.1:%d", st.Ports.APIServer)
			if comp.Healthy && tlsCfg != nil {
				hctx, cancel := context.WithTimeout(ctx, 3*time.Second)
				if err := waitHTTP(hctx, "https://"+comp.Address+"/readyz", tlsCfg); err != nil {
					comp.Healthy, comp.Detail = false, "not ready: "+err.Error()
				}
				cancel()
			}
		case "kwok":
			comp.Address = fmt.Sprintf("127.0.0.1:%d", st.Ports.Kwok)
		}
		if comp.Healthy {
			comp.RSSBytes, comp.PSSBytes = proc.Memory(pid)
		} else if comp.Detail == "" {
			comp.Detail = "not running"
		}
		out.Running = out.Running && comp.Healthy
		out.Components = append(out.Components, comp)
	}
	// Other processes of this cluster: operator supervisors labctl started.
	for _, r := range proc.LoadRecords(filepath.Join(dir, "operators", "*", proc.SupervisorRecord)) {
		if !r.Alive() {
			continue
		}
		rss, pss := proc.Memory(r.PID)
		out.Components = append(out.Components, cluster.Component{Name: "operator", PID: r.PID, Healthy: true, RSSBytes: rss, PSSBytes: pss, Detail: "operator"})
	}
	return out, nil
}
