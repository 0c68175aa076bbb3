package nats

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dovetail-dev/dovetail/shared/queue"
	"github.com/dovetail-dev/dovetail/shared/queue/nats/natsembed"
)

// All tests run against a real embedded nats-server with JetStream; nothing is mocked.

const cluster = "prod"

var events = queue.EventsSubject(cluster)

type env struct {
	t   testing.TB
	srv *natsembed.Server
	url string
	nc  *natsgo.Conn
	pub *Publisher
}

func newEnv(t testing.TB) *env {
	t.Helper()
	s, url, err := natsembed.Run(natsembed.Options{StoreDir: t.TempDir(), Cluster: cluster})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	e := &env{t: t, srv: s, url: url}
	e.nc = e.connect()
	if _, err := EnsureStream(context.Background(), e.nc, StreamConfig{Cluster: cluster}); err != nil {
		t.Fatal(err)
	}
	if e.pub, err = NewPublisher(e.nc); err != nil {
		t.Fatal(err)
	}
	return e
}

// connect connects with every permission: these tests play the agent and the functions at once
// (auth_test.go holds each role to its own).
func (e *env) connect() *natsgo.Conn {
	nc, err := Connect(e.url, e.t.Name(), e.srv.AdminOptions()...)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(nc.Close)
	return nc
}

func (e *env) publish(id, data string) {
	e.t.Helper()
	if err := e.pub.Publish(context.Background(), events, id, []byte(data)); err != nil {
		e.t.Fatal(err)
	}
}

// consumer makes a consumer on its own connection (a separate worker) with short test timings.
func (e *env) consumer(nc *natsgo.Conn, mod func(*ConsumerConfig)) *Consumer {
	e.t.Helper()
	cfg := ConsumerConfig{Cluster: cluster, Durable: "provision", Subject: events,
		Backoff: []time.Duration{20 * time.Millisecond}, Logger: testLogger(e.t, nil)}
	if mod != nil {
		mod(&cfg)
	}
	if nc == nil {
		nc = e.connect()
	}
	c, err := NewConsumer(context.Background(), nc, cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// arrivalBound is how long a test waits for something it expects (a delivery, a dead letter,
// Consume returning after cancel, an ack landing). It only bounds a failure: every wait returns
// as soon as the thing happens, so it is generous for CI's loaded 2-core machine, where many test
// binaries share the cores with the embedded server.
const arrivalBound = 20 * time.Second

// run starts Consume in the background; the returned stop cancels it and waits for it.
func run(t *testing.T, c *Consumer, h queue.Handler) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Consume(ctx, h) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-done:
			case <-time.After(arrivalBound):
				err = errors.New("Consume did not return after cancel")
			}
		})
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

func testLogger(_ testing.TB, buf *bytes.Buffer) *slog.Logger {
	var w io.Writer = io.Discard
	if buf != nil {
		w = &syncWriter{w: buf}
	}
	return slog.New(slog.NewTextHandler(w, nil))
}

type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(arrivalBound):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// dlq reads the next dead-lettered message.
func (e *env) dlq() jetstream.Msg {
	e.t.Helper()
	js, _ := jetstream.New(e.nc)
	ctx := context.Background()
	oc, err := js.OrderedConsumer(ctx, StreamName(cluster), jetstream.OrderedConsumerConfig{FilterSubjects: []string{queue.DeadLetterSubject(cluster)}})
	if err != nil {
		e.t.Fatal(err)
	}
	m, err := oc.Next(jetstream.FetchMaxWait(arrivalBound))
	if err != nil {
		e.t.Fatalf("no dead-lettered message: %v", err)
	}
	return m
}

func (e *env) pendingOf(c *Consumer) (ackPending, pending int, delivered uint64) {
	e.t.Helper()
	info, err := c.cons.Info(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	return info.NumAckPending, int(info.NumPending), info.Delivered.Consumer
}

// waitSettled waits until c holds no message unacknowledged and none is left to deliver: acks,
// naks and terms are sent after the handler returns, so they land a moment after it did.
func (e *env) waitSettled(c *Consumer) {
	e.t.Helper()
	deadline := time.Now().Add(arrivalBound)
	for {
		ack, pend, _ := e.pendingOf(c)
		if ack == 0 && pend == 0 {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("ackPending=%d pending=%d after %s, want 0 0", ack, pend, arrivalBound)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestPublishConsumeAck(t *testing.T) {
	e := newEnv(t)
	for i := range 3 {
		e.publish(fmt.Sprintf("ev-%d", i), fmt.Sprintf("payload-%d", i))
	}
	got := make(chan queue.Message, 10)
	c := e.consumer(nil, nil)
	stop := run(t, c, func(_ context.Context, m queue.Message) error { got <- m; return nil })
	for i := range 3 {
		m := recv(t, got, "message")
		if m.ID != fmt.Sprintf("ev-%d", i) || string(m.Data) != fmt.Sprintf("payload-%d", i) || m.Attempt != 1 || m.Subject != events {
			t.Errorf("message %d = %+v", i, m)
		}
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	// All three acknowledged: nothing in flight, nothing left, three deliveries in total.
	if ack, pend, del := e.pendingOf(c); ack != 0 || pend != 0 || del != 3 {
		t.Errorf("ackPending=%d pending=%d delivered=%d, want 0 0 3", ack, pend, del)
	}
}

func TestHandlerErrorIsRedeliveredWithBackoff(t *testing.T) {
	e := newEnv(t)
	e.publish("ev-1", "x")
	type call struct {
		attempt int
		at      time.Time
	}
	calls := make(chan call, 10)
	c := e.consumer(nil, func(c *ConsumerConfig) { c.Backoff = []time.Duration{200 * time.Millisecond} })
	run(t, c, func(_ context.Context, m queue.Message) error {
		calls <- call{m.Attempt, time.Now()}
		if m.Attempt == 1 {
			return errors.New("cloud API throttled")
		}
		return nil
	})
	first, second := recv(t, calls, "attempt 1"), recv(t, calls, "attempt 2")
	if first.attempt != 1 || second.attempt != 2 {
		t.Fatalf("attempts = %d, %d; want 1, 2", first.attempt, second.attempt)
	}
	// The NAK asked for the first backoff step (200 ms) before redelivery.
	if gap := second.at.Sub(first.at); gap < 200*time.Millisecond {
		t.Errorf("redelivered after %s, want >= 200ms backoff", gap)
	}
	e.waitSettled(c) // the ack lands after the handler returned
}

// A handler that asks to be retried after a delay (queue.RetryAfter) gets that delay, not the
// consumer's backoff: a 200 ms retry comes back long before the configured 1 minute.
func TestRetryAfterOverridesTheBackoff(t *testing.T) {
	e := newEnv(t)
	e.publish("ev-1", "x")
	attempts := make(chan int, 4)
	c := e.consumer(nil, func(c *ConsumerConfig) { c.Backoff = []time.Duration{time.Minute} })
	run(t, c, func(_ context.Context, m queue.Message) error {
		attempts <- m.Attempt
		if m.Attempt == 1 {
			return queue.RetryAfter(errors.New("awaiting a replacement"), 200*time.Millisecond)
		}
		return nil
	})
	if a, b := recv(t, attempts, "attempt 1"), recv(t, attempts, "attempt 2 (within 10 s: the 1 min backoff was not used)"); a != 1 || b != 2 {
		t.Fatalf("attempts %d, %d; want 1, 2", a, b)
	}
}

func TestPoisonGoesToDeadLetterWithReason(t *testing.T) {
	e := newEnv(t)
	e.publish("ev-bad", "garbage")
	var calls atomic.Int32
	c := e.consumer(nil, nil)
	run(t, c, func(context.Context, queue.Message) error {
		calls.Add(1)
		return fmt.Errorf("%w: field snapshot.revision: missing", queue.ErrPoison)
	})
	m := e.dlq()
	h := m.Headers()
	if got := h.Get(HeaderDLQReason); got != "poison message: field snapshot.revision: missing" {
		t.Errorf("reason = %q", got)
	}
	if h.Get(HeaderDLQSubject) != events || h.Get(HeaderDLQDeliveryCount) != "1" ||
		h.Get(HeaderDLQConsumer) != "provision" || h.Get(HeaderDLQMsgID) != "ev-bad" || h.Get(HeaderDLQStreamSeq) != "1" {
		t.Errorf("dead-letter headers = %v", h)
	}
	if string(m.Data()) != "garbage" {
		t.Errorf("dead-letter data = %q", m.Data())
	}
	// The message is terminated after its dead letter is published: once that has landed, nothing
	// can deliver it again.
	e.waitSettled(c)
	if n := calls.Load(); n != 1 {
		t.Errorf("handler called %d times, want 1 (poison is not retried)", n)
	}
}

// A poison message is dead-lettered on its first delivery and does not hold the messages behind
// it, though the consumer holds one message at a time (MaxAckPending 1, DESIGN invariant 3).
func TestPoisonDoesNotHoldTheMessagesBehindIt(t *testing.T) {
	e := newEnv(t)
	e.publish("ev-bad", "garbage")
	e.publish("ev-good", "fine")
	handled := make(chan string, 4)
	c := e.consumer(nil, nil)
	run(t, c, func(_ context.Context, m queue.Message) error {
		handled <- fmt.Sprintf("%s#%d", m.ID, m.Attempt)
		if m.ID == "ev-bad" {
			return fmt.Errorf("%w: data_base64: must be a JSON string", queue.ErrPoison)
		}
		return nil
	})
	if a, b := recv(t, handled, "first"), recv(t, handled, "second"); a != "ev-bad#1" || b != "ev-good#1" {
		t.Fatalf("handled %s then %s, want ev-bad#1 then ev-good#1", a, b)
	}
	if got := e.dlq().Headers().Get(HeaderDLQReason); !strings.Contains(got, "data_base64") {
		t.Errorf("dead-letter reason %q", got)
	}
}

func TestMaxDeliverExhaustionGoesToDeadLetter(t *testing.T) {
	e := newEnv(t)
	e.publish("ev-1", "x")
	attempts := make(chan int, 10)
	c := e.consumer(nil, func(c *ConsumerConfig) { c.MaxDeliver = 3 })
	run(t, c, func(_ context.Context, m queue.Message) error { attempts <- m.Attempt; return errors.New("boom") })
	m := e.dlq()
	if got := m.Headers().Get(HeaderDLQReason); got != "failed 3 of 3 deliveries; last error: boom" {
		t.Errorf("reason = %q", got)
	}
	if got := m.Headers().Get(HeaderDLQDeliveryCount); got != "3" {
		t.Errorf("delivery count = %q", got)
	}
	close(attempts)
	var seen []int
	for a := range attempts {
		seen = append(seen, a)
	}
	if fmt.Sprint(seen) != "[1 2 3]" {
		t.Errorf("attempts = %v, want [1 2 3]", seen)
	}
}

func TestPanicIsRecoveredAndRetried(t *testing.T) {
	e := newEnv(t)
	e.publish("ev-1", "x")
	var logs bytes.Buffer
	done := make(chan int, 2)
	c := e.consumer(nil, func(c *ConsumerConfig) { c.Logger = testLogger(t, &logs) })
	stop := run(t, c, func(_ context.Context, m queue.Message) error {
		if m.Attempt == 1 {
			var np *queue.Message
			_ = np.ID // nil dereference
		}
		done <- m.Attempt
		return nil
	})
	if a := recv(t, done, "retry after panic"); a != 2 {
		t.Fatalf("after panic got attempt %d, want 2", a)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	out := logs.String()
	if !strings.Contains(out, "handler panicked") || !strings.Contains(out, "nil pointer dereference") || !strings.Contains(out, "runtime/debug.Stack") {
		t.Errorf("panic not logged with stack:\n%s", out)
	}
}

func TestDuplicatePublishDeliveredOnce(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	a1, err := e.pub.PublishAck(ctx, events, "ev-same", []byte("first"))
	if err != nil {
		t.Fatal(err)
	}
	a2, err := e.pub.PublishAck(ctx, events, "ev-same", []byte("second"))
	if err != nil {
		t.Fatal(err)
	}
	if a1.Duplicate || !a2.Duplicate || a2.Sequence != a1.Sequence {
		t.Errorf("acks = %+v, %+v; want the second a duplicate of the first", a1, a2)
	}
	e.publish("ev-end", "end")
	got := make(chan queue.Message, 10)
	run(t, e.consumer(nil, nil), func(_ context.Context, m queue.Message) error { got <- m; return nil })
	// The stream is ordered, so a second copy would arrive before the end marker.
	if m := recv(t, got, "first"); m.ID != "ev-same" || string(m.Data) != "first" {
		t.Errorf("first = %+v", m)
	}
	if m := recv(t, got, "end"); m.ID != "ev-end" {
		t.Errorf("second delivery = %+v, want ev-end", m)
	}
	if err := e.pub.Publish(ctx, events, "", []byte("x")); err == nil {
		t.Error("publish without id accepted")
	}
}

func TestStoppedConsumerReleasesMessageToSuccessor(t *testing.T) {
	e := newEnv(t)
	e.publish("ev-1", "x")
	// AckWait is longer than the waits below, so a redelivery before it proves the stopping worker
	// released the message (left to AckWait it would come back no sooner than t0 + AckWait: the
	// message is delivered after t0).
	const ackWait = 3 * arrivalBound
	cfg := func(c *ConsumerConfig) { c.AckWait = ackWait }
	started := make(chan int, 1)
	t0 := time.Now()
	stop1 := run(t, e.consumer(nil, cfg), func(ctx context.Context, m queue.Message) error {
		started <- m.Attempt
		<-ctx.Done()
		return ctx.Err()
	})
	recv(t, started, "first worker")
	if err := stop1(); err != nil {
		t.Fatal(err)
	}
	got := make(chan queue.Message, 1)
	run(t, e.consumer(nil, cfg), func(_ context.Context, m queue.Message) error { got <- m; return nil })
	m := recv(t, got, "redelivery to the successor")
	if m.Attempt != 2 || m.ID != "ev-1" {
		t.Errorf("successor got %+v, want ev-1 attempt 2", m)
	}
	if d := time.Since(t0); d >= ackWait {
		t.Errorf("redelivered %s after the first worker started, not before the %s ack wait; the stopping worker should NAK at once", d, ackWait)
	}
}

func TestKilledWorkerMessageRedeliveredAfterAckWait(t *testing.T) {
	e := newEnv(t)
	e.publish("ev-1", "x")
	cfg := func(c *ConsumerConfig) { c.AckWait = 500 * time.Millisecond }
	nc1 := e.connect()
	started, release := make(chan struct{}, 1), make(chan struct{})
	c1 := e.consumer(nc1, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dead := make(chan error, 1)
	// The message is delivered after t0, so the ack wait cannot expire before t0 + AckWait however
	// long the steps below take on a loaded machine.
	t0 := time.Now()
	go func() {
		dead <- c1.Consume(ctx, func(context.Context, queue.Message) error {
			started <- struct{}{}
			<-release
			return nil
		})
	}()
	recv(t, started, "first worker")
	nc1.Close() // the worker's process dies mid-message: no ack, no nak, no progress
	got := make(chan queue.Message, 1)
	run(t, e.consumer(nil, cfg), func(_ context.Context, m queue.Message) error { got <- m; return nil })
	m := recv(t, got, "redelivery after ack wait")
	if m.Attempt != 2 {
		t.Errorf("attempt = %d, want 2", m.Attempt)
	}
	if d := time.Since(t0); d < 300*time.Millisecond {
		t.Errorf("redelivered after %s, before the 500ms ack wait could expire", d)
	}
	close(release)
	if err := recv(t, dead, "dead worker to return"); !errors.Is(err, natsgo.ErrConnectionClosed) {
		t.Errorf("dead worker's Consume = %v, want connection closed", err)
	}
}

func TestTimedOutDeliveriesAreDeadLettered(t *testing.T) {
	e := newEnv(t)
	e.publish("ev-1", "x")
	cfg := func(c *ConsumerConfig) { c.AckWait = 300 * time.Millisecond; c.MaxDeliver = 1 }
	nc1 := e.connect()
	started := make(chan struct{}, 1)
	c1 := e.consumer(nc1, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go c1.Consume(ctx, func(ctx context.Context, _ queue.Message) error {
		started <- struct{}{}
		<-ctx.Done()
		return nil
	})
	recv(t, started, "only delivery")
	nc1.Close()
	var calls atomic.Int32
	run(t, e.consumer(nil, cfg), func(context.Context, queue.Message) error { calls.Add(1); return nil })
	m := e.dlq()
	if got := m.Headers().Get(HeaderDLQReason); !strings.HasPrefix(got, "delivered 1 times without a result") {
		t.Errorf("reason = %q", got)
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("handler ran %d times past MaxDeliver", n)
	}
}

func TestMaxAckPendingOneKeepsOrderAcrossWorkers(t *testing.T) {
	e := newEnv(t)
	const n = 10
	for i := range n {
		e.publish(fmt.Sprintf("ev-%d", i), fmt.Sprint(i))
	}
	var inFlight, maxInFlight atomic.Int32
	var mu sync.Mutex
	var order []string
	done := make(chan struct{})
	h := func(_ context.Context, m queue.Message) error {
		cur := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			old := maxInFlight.Load()
			if cur <= old || maxInFlight.CompareAndSwap(old, cur) {
				break
			}
		}
		time.Sleep(5 * time.Millisecond) // give the other worker a chance to overlap
		if m.ID == "ev-3" && m.Attempt == 1 {
			return errors.New("transient")
		}
		mu.Lock()
		defer mu.Unlock()
		order = append(order, string(m.Data))
		if len(order) == n {
			close(done)
		}
		return nil
	}
	// Two workers on separate connections share the durable (MaxAckPending defaults to 1).
	run(t, e.consumer(nil, nil), h)
	run(t, e.consumer(nil, nil), h)
	recv(t, done, "all messages")
	if got := strings.Join(order, ","); got != "0,1,2,3,4,5,6,7,8,9" {
		t.Errorf("order = %s; a failed message must not be overtaken", got)
	}
	if m := maxInFlight.Load(); m != 1 {
		t.Errorf("max in flight = %d, want 1", m)
	}
}

func TestConfigErrors(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	cases := []struct {
		cfg  ConsumerConfig
		want string
	}{
		{ConsumerConfig{Cluster: "Prod", Durable: "p", Subject: events}, `consumer config cluster "Prod": must be an RFC 1123 label`},
		{ConsumerConfig{Cluster: cluster, Durable: "a.b", Subject: events}, `consumer config durable "a.b"`},
		{ConsumerConfig{Cluster: cluster, Durable: "p", Subject: queue.DeadLetterSubject(cluster)}, `consumer config subject "dovetail.prod.dlq": must be dovetail.prod.events, dovetail.prod.commands or dovetail.prod.notices`},
		{ConsumerConfig{Cluster: cluster, Durable: "p", Subject: events, MaxDeliver: -2}, "consumer config maxDeliver -2: must be >= 1"},
		{ConsumerConfig{Cluster: "staging", Durable: "p", Subject: queue.EventsSubject("staging")}, "stream dovetail-staging not found (call EnsureStream first)"},
	}
	for _, c := range cases {
		if _, err := NewConsumer(ctx, e.nc, c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewConsumer(%+v) err = %v, want %q", c.cfg, err, c.want)
		}
	}
	if _, err := EnsureStream(ctx, e.nc, StreamConfig{Cluster: "a b"}); err == nil {
		t.Error("EnsureStream accepted cluster \"a b\"")
	}
}

func TestRunEmbeddedTempDirAndStartup(t *testing.T) {
	t0 := time.Now()
	s, url, err := natsembed.Run(natsembed.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("embedded JetStream up in %s at %s", time.Since(t0), url)
	if !strings.HasPrefix(url, "tls://127.0.0.1:") || !s.JetStreamEnabled() {
		t.Errorf("url %q, jetstream %v", url, s.JetStreamEnabled())
	}
	dir := s.StoreDir()
	s.Shutdown()
	s.WaitForShutdown()
	_ = dir // removed in the background after shutdown; nothing to assert without racing it
}

// A handler that runs longer than the settle timeout still gets its ack through: the message is
// delivered once (the bug: the settle deadline started before the handler, the ack timed out,
// and the message came back after AckWait, holding up every message behind it).
func TestLongHandlerIsAckedOnce(t *testing.T) {
	e := newEnv(t)
	e.publish("ev-1", "x")
	calls := make(chan queue.Message, 10)
	c := e.consumer(nil, func(c *ConsumerConfig) { c.AckWait = 30 * time.Second })
	stop := run(t, c, func(_ context.Context, m queue.Message) error {
		calls <- m
		time.Sleep(settleTimeout + time.Second)
		return nil
	})
	if m := recv(t, calls, "delivery"); m.Attempt != 1 {
		t.Fatalf("attempt %d", m.Attempt)
	}
	time.Sleep(500 * time.Millisecond)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if ack, pend, del := e.pendingOf(c); ack != 0 || pend != 0 || del != 1 {
		t.Errorf("ackPending=%d pending=%d delivered=%d, want 0 0 1", ack, pend, del)
	}
}

// A poison message published with JetStream's own headers (here Nats-Expected-Last-Sequence,
// true when it was published and false ever after) is dead-lettered without them: copied, they
// made every dead-letter publish fail and the message was lost after its last delivery.
func TestDeadLetterDropsJetStreamHeaders(t *testing.T) {
	e := newEnv(t)
	js, err := jetstream.New(e.nc)
	if err != nil {
		t.Fatal(err)
	}
	msg := natsgo.NewMsg(events)
	msg.Data = []byte("garbage")
	msg.Header.Set(jetstream.MsgIDHeader, "ev-seq")
	msg.Header.Set(jetstream.ExpectedLastSeqHeader, "0") // the stream is empty: accepted now
	msg.Header.Set("Traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	if _, err := js.PublishMsg(context.Background(), msg); err != nil {
		t.Fatal(err)
	}
	c := e.consumer(nil, nil)
	run(t, c, func(context.Context, queue.Message) error { return fmt.Errorf("%w: bad", queue.ErrPoison) })
	m := e.dlq()
	h := m.Headers()
	for k := range h {
		if strings.HasPrefix(k, "Nats-") && k != jetstream.MsgIDHeader {
			t.Errorf("dead-letter carries %s: %v", k, h[k])
		}
	}
	if h.Get("Traceparent") == "" || h.Get(HeaderDLQMsgID) != "ev-seq" {
		t.Errorf("dead-letter headers %v: want the publisher's own headers and the original id kept", h)
	}
}
