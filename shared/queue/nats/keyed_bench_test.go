package nats

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dovetail-dev/dovetail/shared/queue"
)

// BenchmarkConsumeCommands drains 1,000 messages shaped like a lifecycle pass over 250 new
// nodes (each node's 4 commands published back to back: NominatePods, RegisterNode, the planned
// taint's release, LabelNode) through the embedded JetStream server. The handler sleeps
// applyLatency, a stand-in for one command's API round trips, so the figure compares worker
// counts (one at a time against keyed workers), not absolute times.
func BenchmarkConsumeCommands(b *testing.B) {
	const (
		nodes        = 250
		perNode      = 4
		applyLatency = 2 * time.Millisecond
	)
	for _, workers := range []int{1, 8} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			for i := range b.N {
				b.StopTimer()
				e := newEnv(b)
				for n := range nodes {
					for c := range perNode {
						e.publish(fmt.Sprintf("%d-n%d-c%d", i, n, c), fmt.Sprintf("n%d:%d", n, c))
					}
				}
				var handled atomic.Int32
				done := make(chan struct{})
				h := func(context.Context, queue.Message) error {
					time.Sleep(applyLatency)
					if handled.Add(1) == nodes*perNode {
						close(done)
					}
					return nil
				}
				c, err := NewConsumer(context.Background(), e.nc, ConsumerConfig{Cluster: cluster, Durable: "agent", Subject: events,
					Workers: workers, Key: keyOf, Logger: testLogger(e.t, nil)})
				if err != nil {
					b.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				stopped := make(chan struct{})
				b.StartTimer()
				go func() { _ = c.Consume(ctx, h); close(stopped) }()
				<-done
				b.StopTimer()
				cancel()
				<-stopped
			}
		})
	}
}
