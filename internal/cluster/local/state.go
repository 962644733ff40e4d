package local

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/labctl/labctl/internal/proc"
)

// ports a local cluster listens on, all on 127.0.0.1.
type ports struct {
	Etcd      int `json:"etcd"`
	EtcdPeer  int `json:"etcdPeer"`
	APIServer int `json:"apiserver"`
	Kwok      int `json:"kwok"`
}

func (p ports) list() []int { return []int{p.Etcd, p.EtcdPeer, p.APIServer, p.Kwok} }

// state is what a cluster's directory remembers between labctl runs.
type state struct {
	Name   string         `json:"name"`
	BinDir string         `json:"binDir"`
	Ports  ports          `json:"ports"`
	PIDs   map[string]int `json:"pids"`
	// Procs identify the components' processes (pid and start time): the
	// only processes Down stops.
	Procs   map[string]proc.Record `json:"procs,omitempty"`
	Created time.Time              `json:"created"`
	// UserKubeconfig is the file the context was merged into ("" if none).
	UserKubeconfig string `json:"userKubeconfig,omitempty"`
}

const stateFile = "state.json"

var errNoState = errors.New("no state")

// errCorrupt marks a state file that exists but cannot be used.
type errCorrupt struct{ err error }

func (e errCorrupt) Error() string { return e.err.Error() }

func loadState(dir string) (*state, error) {
	raw, err := os.ReadFile(filepath.Join(dir, stateFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, errNoState
	}
	if err != nil {
		return nil, errCorrupt{err}
	}
	var st state
	if err := json.Unmarshal(raw, &st); err != nil {
		return nil, errCorrupt{fmt.Errorf("%s: %w", stateFile, err)}
	}
	if st.Name == "" || st.BinDir == "" || st.Ports.APIServer == 0 {
		return nil, errCorrupt{fmt.Errorf("%s is incomplete", stateFile)}
	}
	return &st, nil
}

func (st *state) save(dir string) error {
	raw, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, stateFile+".tmp")
	if err := os.WriteFile(tmp, raw, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, stateFile))
}
