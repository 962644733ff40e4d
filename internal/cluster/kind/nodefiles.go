// Reading a node's files and listing its nodes through the engine.

package kind

import (
	"context"
	"fmt"
	"io"

	"sigs.k8s.io/kind/pkg/cluster/nodes"
	"sigs.k8s.io/kind/pkg/cluster/nodeutils"

	"github.com/labctl/labctl/internal/engine"
)

// ReadNodeFile streams a file from a node container (`<engine> exec NODE
// cat PATH`); closing the reader stops the command.
func ReadNodeFile(ctx context.Context, e *engine.Engine, node, path string) io.ReadCloser {
	ctx, cancel := context.WithCancel(ctx)
	pr, pw := io.Pipe()
	go func() {
		err := e.Exec(ctx, node, pw, "cat", path)
		if err != nil && ctx.Err() == nil {
			err = fmt.Errorf("cannot read %s from node %s: %w", path, node, err)
		}
		pw.CloseWithError(err)
	}()
	return &cancelReader{PipeReader: pr, cancel: cancel}
}

type cancelReader struct {
	*io.PipeReader
	cancel context.CancelFunc
}

func (r *cancelReader) Close() error {
	r.cancel()
	return r.PipeReader.Close()
}

// listNodes finds the cluster's engine and lists its node containers.
func (p *Provider) listNodes(ctx context.Context, name string) (*engine.Engine, API, []nodes.Node, error) {
	e, api, err := p.find(ctx, name)
	if err != nil {
		return nil, nil, nil, err
	}
	ns, err := api.ListNodes(name)
	if err != nil {
		return nil, nil, nil, engineError(e, "cannot list the nodes of kind cluster "+name, err)
	}
	return e, api, ns, nil
}

// Nodes returns the node containers of a running cluster (to load images).
func (p *Provider) Nodes(ctx context.Context, name string) (*engine.Engine, []nodes.Node, error) {
	e, _, ns, err := p.listNodes(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	// As kind's own `load` does: only the Kubernetes nodes, never an
	// external load balancer's container.
	internal, err := nodeutils.InternalNodes(ns)
	if err != nil {
		return nil, nil, engineError(e, "cannot read the roles of kind cluster "+name+"'s nodes", err)
	}
	return e, internal, nil
}
