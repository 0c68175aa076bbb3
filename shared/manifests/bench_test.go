package manifests

import (
	"bytes"
	"fmt"
	"testing"
)

// benchDump is a `kubectl get -o yaml` List of n nodes and 19n pods bound round-robin to them
// (the shape of hack/gendump's dumps, trimmed to the fields plan reads).
func benchDump(n int) []byte {
	var b bytes.Buffer
	b.WriteString("apiVersion: v1\nkind: List\nmetadata:\n  resourceVersion: \"\"\nitems:\n")
	for i := range n {
		fmt.Fprintf(&b, `- apiVersion: v1
  kind: Node
  metadata:
    labels:
      kubernetes.io/hostname: node-%d
      node.kubernetes.io/instance-type: m5.xlarge
      topology.kubernetes.io/zone: us-east-1a
    name: node-%d
  spec:
    providerID: aws:///us-east-1a/i-%08x
  status:
    allocatable:
      cpu: 3920m
      memory: 14162Mi
      pods: "58"
`, i, i, i)
	}
	for i := range 19 * n {
		fmt.Fprintf(&b, `- apiVersion: v1
  kind: Pod
  metadata:
    labels:
      app: app-%d
    name: app-%d
    namespace: ns-%d
    ownerReferences:
    - apiVersion: apps/v1
      controller: true
      kind: ReplicaSet
      name: app-%d-rs
      uid: rs-%d
  spec:
    containers:
    - image: registry.k8s.io/pause:3.10
      name: app
      resources:
        requests:
          cpu: 50m
          memory: 64Mi
    nodeName: node-%d
  status:
    phase: Running
`, i%2000, i, i%50, i%2000, i%2000, i%n)
	}
	return b.Bytes()
}

// BenchmarkLoadList reads a kubectl List of 500 nodes and 9,500 pods (10,000 objects).
func BenchmarkLoadList(b *testing.B) {
	data := benchDump(500)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		s, err := LoadReader("dump", bytes.NewReader(data))
		if err != nil {
			b.Fatal(err)
		}
		if s.Objects() != 10000 {
			b.Fatalf("%d objects, want 10000", s.Objects())
		}
	}
}
