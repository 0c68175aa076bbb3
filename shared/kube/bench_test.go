package kube

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/dovetail-dev/dovetail/events"
)

// BenchmarkBuildSnapshot builds (and encodes) a snapshot of 200 nodes with 25 bound pods each
// plus 500 pending pods, from informer caches filled through the fake clientset.
func BenchmarkBuildSnapshot(b *testing.B) {
	var objs []runtime.Object
	for n := 0; n < 200; n++ {
		name := fmt.Sprintf("node-%03d", n)
		objs = append(objs, node(name))
		for p := 0; p < 25; p++ {
			objs = append(objs, pod("default", fmt.Sprintf("%s-p%02d", name, p), name))
		}
	}
	for p := 0; p < 500; p++ {
		objs = append(objs, pod("default", fmt.Sprintf("pending-%03d", p), ""))
	}
	f := newFixture(b, objs)
	want := f.watcher.Revisions().Base() + int64(len(objs))
	for f.watcher.Revision() < want { // informer handlers still delivering the initial list
		time.Sleep(10 * time.Millisecond)
	}
	b.ResetTimer()
	b.ReportAllocs()
	var size int
	for i := 0; i < b.N; i++ {
		snap, err := f.builder.Build()
		if err != nil {
			b.Fatal(err)
		}
		if len(snap.Pods) != 5000 || len(snap.PendingPods) != 500 {
			b.Fatalf("pods %d pending %d", len(snap.Pods), len(snap.PendingPods))
		}
		enc, err := events.EncodeSnapshot(snap)
		if err != nil {
			b.Fatal(err)
		}
		size = len(enc)
	}
	b.ReportMetric(float64(size), "encoded-bytes")
}
