package agent

import (
	"context"
	"sort"
	"time"

	"k8s.io/utils/clock"
)

// Default batch window, Karpenter's BATCH_IDLE_DURATION (1 s) and BATCH_MAX_DURATION (10 s)
// (karpenter.sh settings reference): a window closes after 1 s without a new pending pod, and
// never stays open longer than 10 s.
const (
	DefaultBatchIdle = time.Second
	DefaultBatchMax  = 10 * time.Second
)

// FlushFunc receives the sorted keys ("namespace/name") of a closed window. Returning an error
// re-opens a window with the same keys, so they are flushed again after the idle time.
type FlushFunc func(ctx context.Context, keys []string) error

// Batcher groups pending-pod triggers into windows. A window opens at the first trigger; each
// trigger of a pod not yet in the window pushes its end to idle after it; the window closes at
// min(last new pod + idle, first pod + max). Repeated triggers of a pod already in the window do
// not extend it. All times come from the injected clock.
type Batcher struct {
	idle, max time.Duration
	clock     clock.Clock
	trig      chan trigger
	done      chan struct{}
}

type trigger struct {
	key  string
	done chan struct{}
}

// NewBatcher returns a batcher with the given idle and max durations (<= 0: the defaults).
func NewBatcher(idle, max time.Duration, clk clock.Clock) *Batcher {
	if idle <= 0 {
		idle = DefaultBatchIdle
	}
	if max <= 0 {
		max = DefaultBatchMax
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Batcher{idle: idle, max: max, clock: clk, trig: make(chan trigger), done: make(chan struct{})}
}

// Trigger records a pending pod. It returns once the batcher has taken the pod into the current
// window and re-armed its timer, so a test stepping a fake clock right after sees the new end.
// It waits while a flush runs or until Run starts, and returns at once after Run has returned.
func (b *Batcher) Trigger(key string) {
	t := trigger{key: key, done: make(chan struct{})}
	select {
	case b.trig <- t:
	case <-b.done:
		return
	}
	select {
	case <-t.done:
	case <-b.done:
	}
}

// Run collects triggers and calls flush for each closed window until ctx ends. Flushes run on
// Run's goroutine, one at a time.
func (b *Batcher) Run(ctx context.Context, flush FlushFunc) {
	defer close(b.done)
	var (
		keys           map[string]struct{}
		opened, latest time.Time
		timer          clock.Timer
		fire           <-chan time.Time
	)
	arm := func(now time.Time) {
		end := latest.Add(b.idle)
		if maxEnd := opened.Add(b.max); maxEnd.Before(end) {
			end = maxEnd
		}
		if timer != nil {
			timer.Stop()
		}
		timer = b.clock.NewTimer(end.Sub(now))
		fire = timer.C()
	}
	open := func(now time.Time) {
		keys, opened, latest = map[string]struct{}{}, now, now
	}
	for {
		select {
		case <-ctx.Done():
			if timer != nil {
				timer.Stop()
			}
			return
		case t := <-b.trig:
			now := b.clock.Now()
			if keys == nil {
				open(now)
			}
			if _, seen := keys[t.key]; !seen {
				keys[t.key] = struct{}{}
				latest = now
				arm(now)
			}
			close(t.done)
		case <-fire:
			batch := make([]string, 0, len(keys))
			for k := range keys {
				batch = append(batch, k)
			}
			sort.Strings(batch)
			keys, timer, fire = nil, nil, nil
			if err := flush(ctx, batch); err != nil && ctx.Err() == nil {
				now := b.clock.Now()
				open(now)
				for _, k := range batch {
					keys[k] = struct{}{}
				}
				arm(now)
			}
		}
	}
}
