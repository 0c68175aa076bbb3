package nats

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dovetail-dev/dovetail/shared/queue"
)

// The cluster stream holds exactly the five subjects of queue: events, commands, notices, dlq, audit.
func TestStreamHoldsTheClusterSubjectsIncludingNotices(t *testing.T) {
	e := newEnv(t)
	js, err := jetstream.New(e.nc)
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(context.Background(), StreamName(cluster))
	if err != nil {
		t.Fatal(err)
	}
	got := slices.Clone(s.CachedInfo().Config.Subjects)
	slices.Sort(got)
	want := []string{"dovetail.prod.audit", "dovetail.prod.commands", "dovetail.prod.dlq", "dovetail.prod.events", "dovetail.prod.notices"}
	if !slices.Equal(got, want) {
		t.Errorf("stream subjects = %v, want %v", got, want)
	}
	if queue.NoticesSubject(cluster) != "dovetail.prod.notices" {
		t.Errorf("NoticesSubject = %q", queue.NoticesSubject(cluster))
	}
}

// A durable consumer on the notices subject gets the notices, and only them.
func TestConsumerOnNoticesSubject(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.publish("ev-1", "an event")
	if err := e.pub.Publish(ctx, queue.NoticesSubject(cluster), "notice-1", []byte("a notice")); err != nil {
		t.Fatal(err)
	}
	c := e.consumer(nil, func(c *ConsumerConfig) { c.Durable = "interruption"; c.Subject = queue.NoticesSubject(cluster) })
	got := make(chan queue.Message, 4)
	run(t, c, func(_ context.Context, m queue.Message) error { got <- m; return nil })
	m := recv(t, got, "notice")
	if m.ID != "notice-1" || string(m.Data) != "a notice" || m.Subject != queue.NoticesSubject(cluster) {
		t.Errorf("got %+v, want notice-1 on the notices subject", m)
	}
	select {
	case m := <-got:
		t.Errorf("unexpected second message %+v", m)
	case <-time.After(300 * time.Millisecond):
	}
}

// Follow starts at the last message stored on the subject, then sees every new one; a handler
// error skips the message; two followers each see everything (no shared durable).
func TestFollowStartsAtLastAndSeesEveryMessage(t *testing.T) {
	e := newEnv(t)
	e.publish("ev-1", "one")
	e.publish("ev-2", "two")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type seen struct{ follower, id string }
	got := make(chan seen, 16)
	done := make(chan error, 2)
	for _, name := range []string{"a", "b"} {
		go func() {
			done <- Follow(ctx, e.connect(), cluster, events, func(_ context.Context, m queue.Message) error {
				got <- seen{name, m.ID}
				if m.ID == "ev-3" {
					return errors.New("not used")
				}
				return nil
			}, testLogger(t, nil))
		}()
	}
	count := map[string][]string{}
	for len(count["a"]) < 1 || len(count["b"]) < 1 {
		s := recv(t, got, "first followed message")
		count[s.follower] = append(count[s.follower], s.id)
	}
	e.publish("ev-3", "three")
	e.publish("ev-4", "four")
	for len(count["a"]) < 3 || len(count["b"]) < 3 {
		s := recv(t, got, "followed message")
		count[s.follower] = append(count[s.follower], s.id)
	}
	for _, f := range []string{"a", "b"} {
		// ev-1 is not delivered: the follower starts at the last stored message (ev-2).
		if want := []string{"ev-2", "ev-3", "ev-4"}; !slices.Equal(count[f], want) {
			t.Errorf("follower %s saw %v, want %v", f, count[f], want)
		}
	}
	cancel()
	for range 2 {
		if err := recv(t, done, "Follow to return"); err != nil {
			t.Errorf("Follow returned %v after cancel, want nil", err)
		}
	}
}
