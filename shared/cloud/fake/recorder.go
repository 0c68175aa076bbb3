package fake

import (
	"context"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
)

// NodeRecorder is a NodeRegistrar for tests where no API server runs: it keeps every Node
// registered with it, in order, and refuses none.
type NodeRecorder struct {
	mu    sync.Mutex
	nodes []*corev1.Node
}

// RegisterNode records n.
func (r *NodeRecorder) RegisterNode(_ context.Context, n *corev1.Node) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.nodes = append(r.nodes, n)
	return nil
}

// Nodes returns the Nodes registered so far, in order of registration.
func (r *NodeRecorder) Nodes() []*corev1.Node {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.nodes)
}
