package nats

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dovetail-dev/dovetail/shared/queue"
)

// The keyed tests publish messages whose data is "<key>:<n>"; keyOf reads the key back.
func keyOf(m queue.Message) string { k, _, _ := strings.Cut(string(m.Data), ":"); return k }

func keyed(workers int) func(*ConsumerConfig) {
	return func(c *ConsumerConfig) { c.Workers, c.Key = workers, keyOf }
}

// Two keys' messages run at once: each handler waits for the other to have started, which
// only returns if they overlap (one at a time, the first would wait out arrivalBound and fail).
func TestKeyedDifferentKeysRunConcurrently(t *testing.T) {
	e := newEnv(t)
	e.publish("a-1", "a:1")
	e.publish("b-1", "b:1")
	started := map[string]chan struct{}{"a": make(chan struct{}), "b": make(chan struct{})}
	other := map[string]string{"a": "b", "b": "a"}
	done := make(chan string, 2)
	h := func(ctx context.Context, m queue.Message) error {
		k := keyOf(m)
		close(started[k])
		select {
		case <-started[other[k]]:
		case <-time.After(arrivalBound):
			return queue.ErrPoison // not overlapping: fails the test below
		}
		done <- k
		return nil
	}
	c := e.consumer(nil, keyed(2))
	run(t, c, h)
	got := map[string]bool{recv(t, done, "first handler"): true, recv(t, done, "second handler"): true}
	if !got["a"] || !got["b"] {
		t.Errorf("handled %v, want a and b", got)
	}
	e.waitSettled(c)
}

// Messages of one key run one at a time in publish order while other keys interleave; the
// workers outnumber the keys so a worker is always free to break the order if it could.
func TestKeyedSameKeyRunsInPublishOrder(t *testing.T) {
	e := newEnv(t)
	const perKey = 15
	keys := []string{"a", "b", "c"}
	for i := range perKey {
		for _, k := range keys {
			e.publish(fmt.Sprintf("%s-%d", k, i), fmt.Sprintf("%s:%d", k, i))
		}
	}
	var mu sync.Mutex
	order := map[string][]string{}
	running := map[string]int{}
	var overlap []string
	done := make(chan struct{})
	total := 0
	h := func(_ context.Context, m queue.Message) error {
		k := keyOf(m)
		mu.Lock()
		running[k]++
		if running[k] > 1 {
			overlap = append(overlap, string(m.Data))
		}
		mu.Unlock()
		time.Sleep(time.Millisecond) // widen the window an overlap would show in
		mu.Lock()
		defer mu.Unlock()
		running[k]--
		order[k] = append(order[k], string(m.Data))
		if total++; total == perKey*len(keys) {
			close(done)
		}
		return nil
	}
	run(t, e.consumer(nil, keyed(8)), h)
	recv(t, done, "all messages")
	mu.Lock()
	defer mu.Unlock()
	for _, k := range keys {
		var want []string
		for i := range perKey {
			want = append(want, fmt.Sprintf("%s:%d", k, i))
		}
		if got := strings.Join(order[k], ","); got != strings.Join(want, ",") {
			t.Errorf("key %s ran in order %s, want %s", k, got, strings.Join(want, ","))
		}
	}
	if len(overlap) > 0 {
		t.Errorf("messages %v ran while another message of their key did", overlap)
	}
}

// A failing message is redelivered and its key's later messages wait for it, while other keys
// go on: a:1 fails once, and its second attempt waits until b:1 (published after a:2) has run,
// which would never happen if a's failure held up b. a:2 must run after a:1 succeeded.
func TestKeyedFailureHoldsOnlyItsKeyAndIsRedelivered(t *testing.T) {
	e := newEnv(t)
	e.publish("a-1", "a:1")
	e.publish("a-2", "a:2")
	e.publish("b-1", "b:1")
	bDone := make(chan struct{})
	var mu sync.Mutex
	var log []string
	all := make(chan struct{})
	h := func(_ context.Context, m queue.Message) error {
		rec := func(s string) {
			mu.Lock()
			defer mu.Unlock()
			log = append(log, s)
			if len(log) == 4 {
				close(all)
			}
		}
		switch {
		case m.ID == "a-1" && m.Attempt == 1:
			rec("a:1 failed")
			return errors.New("transient")
		case m.ID == "a-1":
			select {
			case <-bDone:
			case <-time.After(arrivalBound):
				return queue.ErrPoison
			}
			rec(fmt.Sprintf("a:1 attempt %d", m.Attempt))
		case m.ID == "b-1":
			rec("b:1")
			close(bDone)
		default:
			rec(string(m.Data))
		}
		return nil
	}
	c := e.consumer(nil, keyed(4))
	run(t, c, h)
	recv(t, all, "four handler results")
	e.waitSettled(c)
	mu.Lock()
	defer mu.Unlock()
	var a []string
	for _, s := range log {
		if strings.HasPrefix(s, "a:") {
			a = append(a, s)
		}
	}
	if got, want := strings.Join(a, ", "), "a:1 failed, a:1 attempt 2, a:2"; got != want {
		t.Errorf("key a ran %q, want %q (all: %v)", got, want, log)
	}
}

// A message dead-lettered (poison) releases the messages of its key behind it, as with one
// worker: it is not redelivered, so nothing is awaited.
func TestKeyedPoisonReleasesItsKey(t *testing.T) {
	e := newEnv(t)
	e.publish("a-1", "a:1")
	e.publish("a-2", "a:2")
	got := make(chan string, 2)
	h := func(_ context.Context, m queue.Message) error {
		if m.ID == "a-1" {
			return fmt.Errorf("%w: bad", queue.ErrPoison)
		}
		got <- m.ID
		return nil
	}
	c := e.consumer(nil, keyed(2))
	run(t, c, h)
	if id := recv(t, got, "a-2"); id != "a-2" {
		t.Errorf("ran %s, want a-2", id)
	}
	if id := e.dlq().Headers().Get(HeaderDLQMsgID); id != "a-1" {
		t.Errorf("dead-lettered %q, want a-1", id)
	}
	e.waitSettled(c)
}

// Stopping releases every message held, those waiting behind a redelivery included, so a
// successor consumer gets them all.
func TestKeyedStopReleasesHeldMessages(t *testing.T) {
	e := newEnv(t)
	e.publish("a-1", "a:1")
	e.publish("a-2", "a:2")
	e.publish("a-3", "a:3")
	first := make(chan struct{})
	h := func(_ context.Context, m queue.Message) error {
		if m.ID == "a-1" {
			close(first)
			return queue.RetryAfter(errors.New("later"), time.Hour) // a-2, a-3 wait behind it
		}
		return nil
	}
	stop := run(t, e.consumer(nil, keyed(2)), h)
	recv(t, first, "a-1")
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	seen := make(chan string, 3)
	run(t, e.consumer(nil, keyed(2)), func(_ context.Context, m queue.Message) error { seen <- m.ID; return nil })
	// a-1 waits out its hour; a-2 and a-3 were released at stop and come to the successor (in
	// whatever order JetStream hands them over: the order is promised within one Consume call).
	got := []string{recv(t, seen, "a released message"), recv(t, seen, "a released message")}
	sort.Strings(got)
	if strings.Join(got, ",") != "a-2,a-3" {
		t.Errorf("successor got %v, want [a-2 a-3]", got)
	}
}

func TestKeyedConfig(t *testing.T) {
	e := newEnv(t)
	c := e.consumer(nil, keyed(3))
	if c.cfg.MaxAckPending != DefaultLookahead*3 {
		t.Errorf("MaxAckPending = %d, want %d (DefaultLookahead × Workers)", c.cfg.MaxAckPending, DefaultLookahead*3)
	}
	for _, tc := range []struct {
		mod  func(*ConsumerConfig)
		want string
	}{
		{func(c *ConsumerConfig) { c.Workers = -1 }, "workers -1: must be >= 1"},
		{func(c *ConsumerConfig) { c.Workers, c.MaxAckPending = 4, 2 }, "maxAckPending 2: must be >= workers (4)"},
	} {
		cfg := ConsumerConfig{Cluster: cluster, Durable: "provision", Subject: events}
		tc.mod(&cfg)
		_, err := NewConsumer(context.Background(), e.nc, cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("err = %v, want %q", err, tc.want)
		}
	}
}

// A NAK without delay comes back at once, possibly before the lane has recorded that it waits
// for it: the redelivery still goes first, and the lane does not then wait out a give-up time
// (AckWait is longer than the test waits, so a stall fails it).
func TestKeyedImmediateRedeliveryRunsFirst(t *testing.T) {
	e := newEnv(t)
	const n = 5
	for i := range n {
		e.publish(fmt.Sprintf("a-%d", i), fmt.Sprintf("a:%d", i))
	}
	var mu sync.Mutex
	var order []string
	done := make(chan struct{})
	h := func(_ context.Context, m queue.Message) error {
		mu.Lock()
		defer mu.Unlock()
		if m.Attempt == 1 && m.ID != "a-4" {
			order = append(order, m.ID+" failed")
			return errors.New("transient")
		}
		order = append(order, m.ID)
		if m.ID == "a-4" {
			close(done)
		}
		return nil
	}
	run(t, e.consumer(nil, func(c *ConsumerConfig) {
		keyed(2)(c)
		c.Backoff, c.AckWait = []time.Duration{0}, 3*arrivalBound
	}), h)
	recv(t, done, "a-4")
	mu.Lock()
	defer mu.Unlock()
	want := "a-0 failed,a-0,a-1 failed,a-1,a-2 failed,a-2,a-3 failed,a-3,a-4"
	if got := strings.Join(order, ","); got != want {
		t.Errorf("ran %s, want %s", got, want)
	}
}
