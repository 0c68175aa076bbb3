package nats

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dovetail-dev/dovetail/shared/queue"
	"github.com/dovetail-dev/dovetail/shared/queue/nats/natsauth"
	"github.com/dovetail-dev/dovetail/shared/queue/nats/natsembed"
	"github.com/dovetail-dev/dovetail/shared/telemetry"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// The embedded server enforces natsauth's table (TLS only, one nkey user per role); these tests
// hold each role to it through the real Publisher, Consumer, Follow and ReadAudit code.

// roleConn connects as role and records the server's permission violations, which nats.go
// reports asynchronously (a denied publish without a reply is otherwise silent).
type roleConn struct {
	nc         *natsgo.Conn
	mu         sync.Mutex
	violations []string
}

func (e *env) connectAs(role natsauth.Role) *roleConn {
	e.t.Helper()
	rc := &roleConn{}
	opts := append(e.srv.ClientOptions(role), natsgo.ErrorHandler(func(_ *natsgo.Conn, _ *natsgo.Subscription, err error) {
		rc.mu.Lock()
		rc.violations = append(rc.violations, err.Error())
		rc.mu.Unlock()
	}))
	nc, err := Connect(e.url, e.t.Name()+"-"+string(role), opts...)
	if err != nil {
		e.t.Fatalf("connect as %s: %v", role, err)
	}
	e.t.Cleanup(nc.Close)
	rc.nc = nc
	return rc
}

// violated reports whether the server refused rc something on subject.
func (rc *roleConn) violated(subject string) bool {
	time.Sleep(50 * time.Millisecond) // the -ERR arrives after the request gave up
	for _, v := range rc.seen() {
		if strings.Contains(v, "Permissions Violation") && strings.Contains(v, `"`+subject+`"`) {
			return true
		}
	}
	return false
}

func (rc *roleConn) seen() []string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]string(nil), rc.violations...)
}

// refused is whether err is the server's permission violation (or the publish ack that never
// comes back because the message was dropped: a JetStream publish to a denied subject times out
// or finds no responders, as the server drops it before the stream sees it).
func refused(err error) bool {
	return err != nil && (errors.Is(err, natsgo.ErrPermissionViolation) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, natsgo.ErrTimeout) || errors.Is(err, natsgo.ErrNoResponders) ||
		strings.Contains(strings.ToLower(err.Error()), "permissions violation"))
}

// refusalWait bounds a request the server refuses: a denied JetStream API request gets no reply,
// only an asynchronous permissions violation, so the client waits out its context.
const refusalWait = 500 * time.Millisecond

func shortCtx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), refusalWait)
	_ = cancel // released when the deadline passes
	return ctx
}

func publishAs(t *testing.T, rc *roleConn, subject, id string) error {
	t.Helper()
	p, err := NewPublisher(rc.nc)
	if err != nil {
		t.Fatal(err)
	}
	return p.Publish(shortCtx(), subject, id, []byte("x"))
}

func storedIDs(t *testing.T, e *env, subject string) map[string]bool {
	t.Helper()
	ids := map[string]bool{}
	s, err := e.pub.js.Stream(context.Background(), StreamName(cluster))
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && seq > 0; seq++ {
		m, err := s.GetMsg(context.Background(), seq)
		if err != nil {
			continue
		}
		if m.Subject == subject {
			ids[m.Header.Get("Nats-Msg-Id")] = true
		}
	}
	return ids
}

func TestNoCredentialsRefused(t *testing.T) {
	e := newEnv(t)
	// TLS verified, no nkey: the server refuses the connection itself.
	if nc, err := Connect(e.url, "anonymous", append(e.srv.TLSOptions(), natsgo.MaxReconnects(0))...); err == nil {
		nc.Close()
		t.Fatal("a client without credentials connected")
	} else if !errors.Is(err, natsgo.ErrAuthorization) && !strings.Contains(strings.ToLower(err.Error()), "authorization") {
		t.Fatalf("err = %v, want an authorization violation", err)
	}
	// No TLS at all: the server requires it.
	if nc, err := Connect(strings.Replace(e.url, "tls://", "nats://", 1), "plain", natsgo.MaxReconnects(0)); err == nil {
		nc.Close()
		t.Fatal("a plain-text client connected to a TLS-only server")
	}
}

func TestWrongCARefused(t *testing.T) {
	e := newEnv(t)
	// A second embedded server's CA is a CA this server's certificate was not signed by.
	other, _, err := natsembed.Run(natsembed.Options{Cluster: cluster})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Shutdown(); other.WaitForShutdown() })
	opts := append(other.ClientOptions(natsauth.RoleAgent), natsgo.MaxReconnects(0))
	nc, err := Connect(e.url, "wrong-ca", opts...)
	if err == nil {
		nc.Close()
		t.Fatal("a client verifying with another CA connected")
	}
	var uae x509.UnknownAuthorityError
	if !errors.As(err, &uae) && !strings.Contains(err.Error(), "certificate signed by unknown authority") {
		t.Fatalf("err = %v, want an unknown-authority TLS error", err)
	}
}

func TestScheduledEventsRolePublishesNoticesOnly(t *testing.T) {
	e := newEnv(t)
	rc := e.connectAs(natsauth.RoleScheduledEvents)
	if err := publishAs(t, rc, queue.NoticesSubject(cluster), "notice-1"); err != nil {
		t.Fatalf("notice publish: %v", err)
	}
	for _, subject := range []string{queue.CommandsSubject(cluster), queue.EventsSubject(cluster), queue.AuditSubject(cluster)} {
		if err := publishAs(t, rc, subject, "forged-"+subject); !refused(err) || !rc.violated(subject) {
			t.Errorf("scheduled-events publish to %s: err = %v, violations %v, want refused", subject, err, rc.seen())
		}
	}
	// Reading commands: neither a consumer on the commands subject nor pulling the agent's.
	if _, err := NewConsumer(shortCtx(), rc.nc, ConsumerConfig{Cluster: cluster, Durable: "agent",
		Subject: queue.CommandsSubject(cluster), Logger: quiet}); !refused(err) {
		t.Errorf("scheduled-events consumer on commands: err = %v, want refused", err)
	}
	if _, err := rc.nc.SubscribeSync(queue.CommandsSubject(cluster)); err == nil {
		rc.nc.Flush()
	}
	time.Sleep(100 * time.Millisecond)
	if v := strings.Join(rc.seen(), "\n"); !strings.Contains(v, "Subscription to \""+queue.CommandsSubject(cluster)+"\"") {
		t.Errorf("subscribing to commands was not refused; violations: %s", v)
	}
	stored := storedIDs(t, e, queue.CommandsSubject(cluster))
	if len(stored) != 0 {
		t.Errorf("commands stored: %v, want none", stored)
	}
	if !storedIDs(t, e, queue.NoticesSubject(cluster))["notice-1"] {
		t.Error("the notice was not stored")
	}
}

// The agent publishes events and consumes commands through its durable, and may not publish
// commands; a function consumes events through its durable, follows events, publishes commands
// and audit records, and may not publish events or pull the agent's commands.
func TestAgentAndFunctionRolesDoTheirJobOnly(t *testing.T) {
	e := newEnv(t)
	agent := e.connectAs(natsauth.RoleAgent)
	fn := e.connectAs(natsauth.RoleFunction)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	// Both may ensure the stream (it exists: an update to the same config).
	for _, rc := range []*roleConn{agent, fn} {
		if _, err := EnsureStream(ctx, rc.nc, StreamConfig{Cluster: cluster}); err != nil {
			t.Fatalf("EnsureStream: %v", err)
		}
	}
	if err := publishAs(t, agent, queue.EventsSubject(cluster), "ev-1"); err != nil {
		t.Fatalf("agent event publish: %v", err)
	}
	if err := publishAs(t, agent, queue.CommandsSubject(cluster), "forged-cmd"); !refused(err) || !agent.violated(queue.CommandsSubject(cluster)) {
		t.Errorf("agent command publish: err = %v, violations %v, want refused", err, agent.seen())
	}
	if err := publishAs(t, fn, queue.EventsSubject(cluster), "forged-ev"); !refused(err) || !fn.violated(queue.EventsSubject(cluster)) {
		t.Errorf("function event publish: err = %v, violations %v, want refused", err, fn.seen())
	}

	// The function's durable reads the event and, as provision would, publishes a command.
	fnCons, err := NewConsumer(ctx, fn.nc, ConsumerConfig{Cluster: cluster, Durable: "provision",
		Subject: queue.EventsSubject(cluster), Logger: quiet, AckWait: 2 * time.Second})
	if err != nil {
		t.Fatalf("function consumer: %v", err)
	}
	fnPub, _ := NewPublisher(fn.nc)
	got := make(chan string, 4)
	fnCtx, fnStop := context.WithCancel(ctx)
	fnDone := make(chan error, 1)
	go func() {
		fnDone <- fnCons.Consume(fnCtx, func(ctx context.Context, m queue.Message) error {
			got <- "event " + m.ID
			PublishAudit(fnPub, cluster, func(err error) { got <- "audit publish failed: " + err.Error() })(ctx,
				telemetry.Audit{Function: "provision", Decision: "launch"})
			return fnPub.Publish(ctx, queue.CommandsSubject(cluster), "cmd-1", []byte("a command"))
		})
	}()
	if g := recvString(t, got); g != "event ev-1" {
		t.Fatalf("function got %q", g)
	}

	// The agent's durable reads the command and acks it.
	agentCons, err := NewConsumer(ctx, agent.nc, ConsumerConfig{Cluster: cluster, Durable: natsauth.AgentDurable,
		Subject: queue.CommandsSubject(cluster), Logger: quiet, AckWait: 2 * time.Second})
	if err != nil {
		t.Fatalf("agent consumer: %v", err)
	}
	agCtx, agStop := context.WithCancel(ctx)
	agDone := make(chan error, 1)
	go func() {
		agDone <- agentCons.Consume(agCtx, func(_ context.Context, m queue.Message) error {
			got <- "command " + m.ID
			return nil
		})
	}()
	if g := recvString(t, got); g != "command cmd-1" {
		t.Fatalf("agent got %q", g)
	}
	fnStop()
	agStop()
	for _, ch := range []chan error{fnDone, agDone} {
		if err := <-ch; err != nil {
			t.Errorf("consume: %v", err)
		}
	}
	// Read back as admin: the agent's role may not ask for consumer info, and needs none.
	if info, err := e.pub.js.Consumer(ctx, StreamName(cluster), natsauth.AgentDurable); err != nil {
		t.Fatal(err)
	} else if ci := info.CachedInfo(); ci.NumAckPending != 0 || ci.NumPending != 0 || ci.Delivered.Consumer != 1 {
		t.Errorf("agent durable: ackPending=%d pending=%d delivered=%d, want 0 0 1 (acked through $JS.ACK)",
			ci.NumAckPending, ci.NumPending, ci.Delivered.Consumer)
	}
	_ = agentCons

	// The function may not take over or pull from the agent's durable.
	if _, err := NewConsumer(shortCtx(), fn.nc, ConsumerConfig{Cluster: cluster, Durable: natsauth.AgentDurable,
		Subject: queue.CommandsSubject(cluster), Logger: quiet}); !refused(err) ||
		!fn.violated("$JS.API.CONSUMER.CREATE."+StreamName(cluster)+".agent."+queue.CommandsSubject(cluster)) {
		t.Errorf("function consumer on the agent's durable: err = %v, violations %v, want refused", err, fn.seen())
	}
	// Nor may the agent create a function's durable (read events).
	if _, err := NewConsumer(shortCtx(), agent.nc, ConsumerConfig{Cluster: cluster, Durable: "provision",
		Subject: queue.EventsSubject(cluster), Logger: quiet}); !refused(err) {
		t.Errorf("agent consumer on events: err = %v, want refused", err)
	}

	// Follow (the interruption function's view of snapshots) works with the function's role.
	followed := make(chan string, 1)
	fctx, fstop := context.WithCancel(ctx)
	fdone := make(chan error, 1)
	go func() {
		fdone <- Follow(fctx, fn.nc, cluster, queue.EventsSubject(cluster), func(_ context.Context, m queue.Message) error {
			select {
			case followed <- m.ID:
			default:
			}
			return nil
		}, quiet)
	}()
	if id := recvString(t, followed); id != "ev-1" {
		t.Errorf("followed %q, want ev-1", id)
	}
	fstop()
	if err := <-fdone; err != nil {
		t.Errorf("follow: %v", err)
	}
	if ids := storedIDs(t, e, queue.CommandsSubject(cluster)); len(ids) != 1 || !ids["cmd-1"] {
		t.Errorf("commands stored %v, want only the function's cmd-1", ids)
	}
	if ids := storedIDs(t, e, queue.AuditSubject(cluster)); len(ids) != 1 {
		t.Errorf("audit records stored %v, want the function's one", ids)
	}
}

func TestAuditRoleReadsAuditOnly(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.pub.Publish(ctx, queue.AuditSubject(cluster), "a-1", []byte(`{"function":"provision","decision":"launch"}`)); err != nil {
		t.Fatal(err)
	}
	e.publish("ev-1", "snapshot")
	rc := e.connectAs(natsauth.RoleAudit)
	n := 0
	if err := ReadAudit(ctx, rc.nc, cluster, false, func(a telemetry.Audit) error { n++; return nil }); err != nil {
		t.Fatalf("ReadAudit as audit: %v", err)
	}
	if n != 1 {
		t.Errorf("read %d audit records, want 1", n)
	}
	if err := Follow(shortCtx(), rc.nc, cluster, queue.EventsSubject(cluster), func(context.Context, queue.Message) error { return nil }, quiet); !refused(err) {
		t.Errorf("audit role following events: err = %v, want refused", err)
	}
	if err := publishAs(t, rc, queue.AuditSubject(cluster), "forged-audit"); !refused(err) {
		t.Errorf("audit role publish: err = %v, want refused", err)
	}
}

func recvString(t *testing.T, ch chan string) string {
	t.Helper()
	select {
	case s := <-ch:
		return s
	case <-time.After(10 * time.Second):
		t.Fatal("timed out")
		return ""
	}
}

// A function's consumer dead-letters a poison event with its own role: the publish to the
// dead-letter subject and the term on $JS.ACK are both in the role.
func TestFunctionRoleDeadLetters(t *testing.T) {
	e := newEnv(t)
	e.publish("ev-poison", "garbage")
	fn := e.connectAs(natsauth.RoleFunction)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := NewConsumer(ctx, fn.nc, ConsumerConfig{Cluster: cluster, Durable: "drift", Subject: queue.EventsSubject(cluster), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	cctx, stop := context.WithCancel(ctx)
	go func() {
		done <- c.Consume(cctx, func(context.Context, queue.Message) error { return fmt.Errorf("%w: not a snapshot", queue.ErrPoison) })
	}()
	m := e.dlq()
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if m.Headers().Get(HeaderDLQMsgID) != "ev-poison" || m.Headers().Get(HeaderDLQConsumer) != "drift" {
		t.Errorf("dead letter headers %v", m.Headers())
	}
	if v := fn.seen(); len(v) != 0 {
		t.Errorf("permission violations while dead-lettering: %v", v)
	}
}

// The audit role's grant to create consumers is bound to the audit subject by the subject the
// request is sent on: a request whose body asks for the commands subject is refused by the
// server (nats-server jetstream_api.go, JSConsumerCreateFilterSubjectMismatchErr), so the grant
// cannot be stretched to read commands.
func TestAuditRoleCannotStretchItsFilter(t *testing.T) {
	e := newEnv(t)
	rc := e.connectAs(natsauth.RoleAudit)
	subject := "$JS.API.CONSUMER.CREATE." + StreamName(cluster) + ".sneak." + queue.AuditSubject(cluster)
	// JetStream error codes (nats-server errors.json): 10131 JSConsumerCreateFilterSubjectMismatchErr,
	// 10137 JSConsumerMultipleFiltersNotAllowed, 10081 JSConsumerDeliverCycleErr.
	for body, code := range map[string]string{
		`{"stream_name":"` + StreamName(cluster) + `","config":{"name":"sneak","filter_subject":"` + queue.CommandsSubject(cluster) + `","ack_policy":"none"}}`:    `"err_code":10131`,
		`{"stream_name":"` + StreamName(cluster) + `","config":{"name":"sneak","filter_subjects":["` + queue.CommandsSubject(cluster) + `"],"ack_policy":"none"}}`: `"err_code":10137`,
		// A push consumer whose server-side deliveries would land on the commands subject.
		`{"stream_name":"` + StreamName(cluster) + `","config":{"name":"sneak","filter_subject":"` + queue.AuditSubject(cluster) + `","deliver_subject":"` + queue.CommandsSubject(cluster) + `","ack_policy":"none"}}`: `"err_code":10081`,
	} {
		resp, err := rc.nc.Request(subject, []byte(body), 2*time.Second)
		if err != nil {
			t.Fatalf("request: %v", err)
		}
		if !strings.Contains(string(resp.Data), code) {
			t.Errorf("response %s, want the server's refusal %s", resp.Data, code)
		}
	}
	if _, err := e.pub.js.Consumer(context.Background(), StreamName(cluster), "sneak"); err == nil {
		t.Error(`consumer "sneak" exists`)
	}
}

// No role may reconfigure the stream: an update to max_msgs 1 dropped every command stored,
// and one to the subjects stopped the stream capturing commands at all (nats-server applies
// a stream update from anyone allowed $JS.API.STREAM.UPDATE.<stream>). EnsureStream still works
// for every role that calls it on the stream as it is.
func TestNoRoleReconfiguresTheStream(t *testing.T) {
	e := newEnv(t)
	for i := 0; i < 3; i++ {
		if err := e.pub.Publish(context.Background(), queue.CommandsSubject(cluster), fmt.Sprintf("cmd-%d", i), []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	for _, role := range []natsauth.Role{natsauth.RoleAgent, natsauth.RoleFunction} {
		rc := e.connectAs(role)
		if _, err := EnsureStream(shortCtx(), rc.nc, StreamConfig{Cluster: cluster}); err != nil {
			t.Fatalf("EnsureStream as %s on the stream as it is: %v", role, err)
		}
		js, err := jetstream.New(rc.nc)
		if err != nil {
			t.Fatal(err)
		}
		s, err := e.pub.js.Stream(context.Background(), StreamName(cluster))
		if err != nil {
			t.Fatal(err)
		}
		cfg := s.CachedInfo().Config
		cfg.MaxMsgs, cfg.Subjects = 1, []string{queue.EventsSubject(cluster)}
		ctx, cancel := context.WithTimeout(context.Background(), refusalWait)
		_, err = js.UpdateStream(ctx, cfg)
		cancel()
		if !refused(err) {
			t.Errorf("stream update as %s: %v, want refused", role, err)
		}
		info, err := s.Info(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Msgs != 3 || len(info.Config.Subjects) != 5 {
			t.Errorf("after an update as %s: %d messages, subjects %v; want the 3 commands and the 5 subjects", role, info.State.Msgs, info.Config.Subjects)
		}
	}
	// A stream configured otherwise is reported, naming the field, and left as it is.
	_, err := EnsureStream(shortCtx(), e.connectAs(natsauth.RoleAgent).nc, StreamConfig{Cluster: cluster, MaxAge: time.Hour})
	if err == nil || !strings.Contains(err.Error(), "config.max_age is 24h0m0s, want 1h0m0s") {
		t.Errorf("EnsureStream with another max age: %v, want an error naming config.max_age", err)
	}
}
