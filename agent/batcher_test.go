package agent

import (
	"context"
	"strings"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"
)

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

type flushed struct {
	at   time.Duration // since t0, on the fake clock
	keys []string
}

// startBatcher runs a batcher on a fake clock with Karpenter's defaults (1 s idle, 10 s max).
func startBatcher(t *testing.T) (*Batcher, *testingclock.FakeClock, chan flushed) {
	clk := testingclock.NewFakeClock(t0)
	b := NewBatcher(0, 0, clk)
	out := make(chan flushed, 10)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go b.Run(ctx, func(_ context.Context, keys []string) error {
		out <- flushed{at: clk.Since(t0), keys: keys}
		return nil
	})
	return b, clk, out
}

func expectNoFlush(t *testing.T, out chan flushed, at string) {
	t.Helper()
	select {
	case f := <-out:
		t.Fatalf("%s: unexpected flush at %s of %v", at, f.at, f.keys)
	case <-time.After(30 * time.Millisecond):
	}
}

func expectFlush(t *testing.T, out chan flushed) flushed {
	t.Helper()
	select {
	case f := <-out:
		return f
	case <-time.After(5 * time.Second):
		t.Fatal("no flush")
		return flushed{}
	}
}

func TestBatcherIdleClose(t *testing.T) {
	b, clk, out := startBatcher(t)
	// Pods at 0.0, 0.5 and 1.0 s: the window closes 1 s (idle) after the last, at 2.0 s.
	for i, k := range []string{"ns/c", "ns/a", "ns/b"} {
		if i > 0 {
			clk.Step(500 * time.Millisecond)
		}
		b.Trigger(k)
	}
	clk.Step(500 * time.Millisecond) // 1.5 s
	expectNoFlush(t, out, "1.5s")
	clk.Step(500 * time.Millisecond) // 2.0 s
	f := expectFlush(t, out)
	if f.at != 2*time.Second || strings.Join(f.keys, ",") != "ns/a,ns/b,ns/c" {
		t.Fatalf("flush at %s of %v, want one batch at 2s of ns/a,ns/b,ns/c", f.at, f.keys)
	}
}

func TestBatcherMaxClose(t *testing.T) {
	b, clk, out := startBatcher(t)
	// A new pod every 0.5 s never leaves 1 s idle; the window closes at the 10 s max with the 20
	// pods that arrived at 0.0, 0.5, ..., 9.5 s.
	for i := 0; i < 20; i++ {
		if i > 0 {
			clk.Step(500 * time.Millisecond)
		}
		b.Trigger("ns/p" + string(rune('a'+i)))
		if i < 19 {
			expectNoFlushFast(t, out)
		}
	}
	clk.Step(500 * time.Millisecond) // 10.0 s
	f := expectFlush(t, out)
	if f.at != 10*time.Second || len(f.keys) != 20 {
		t.Fatalf("flush at %s of %d pods, want 10s and 20", f.at, len(f.keys))
	}
	// The next pod opens a new window: 1 s idle from 10.5 s.
	clk.Step(500 * time.Millisecond)
	b.Trigger("ns/late")
	clk.Step(time.Second)
	if f := expectFlush(t, out); f.at != 11500*time.Millisecond || strings.Join(f.keys, ",") != "ns/late" {
		t.Fatalf("second window: flush at %s of %v, want 11.5s of ns/late", f.at, f.keys)
	}
}

func expectNoFlushFast(t *testing.T, out chan flushed) {
	t.Helper()
	select {
	case f := <-out:
		t.Fatalf("unexpected flush at %s", f.at)
	default:
	}
}

func TestBatcherRepeatDoesNotExtend(t *testing.T) {
	b, clk, out := startBatcher(t)
	b.Trigger("ns/a")
	clk.Step(500 * time.Millisecond)
	b.Trigger("ns/a") // the same pod again (a status update): the window still ends at 1 s
	clk.Step(500 * time.Millisecond)
	if f := expectFlush(t, out); f.at != time.Second || len(f.keys) != 1 {
		t.Fatalf("flush at %s of %v, want 1s of [ns/a]", f.at, f.keys)
	}
}

func TestBatcherRetriesFailedFlush(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	b := NewBatcher(0, 0, clk)
	out := make(chan flushed, 10)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fail := true
	go b.Run(ctx, func(_ context.Context, keys []string) error {
		out <- flushed{at: clk.Since(t0), keys: keys}
		if fail {
			fail = false
			return context.DeadlineExceeded
		}
		return nil
	})
	b.Trigger("ns/a")
	clk.Step(time.Second)
	expectFlush(t, out) // fails at 1 s
	// The failed batch is re-opened at 1 s; wait until its timer is armed, then idle once more.
	for !clk.HasWaiters() {
		time.Sleep(time.Millisecond)
	}
	clk.Step(time.Second)
	if f := expectFlush(t, out); f.at != 2*time.Second || strings.Join(f.keys, ",") != "ns/a" {
		t.Fatalf("retry flush at %s of %v, want 2s of ns/a", f.at, f.keys)
	}
}
