package nats

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dovetail-dev/dovetail/shared/queue"
)

// consumeKeyed is Consume with Workers > 1 (see Consumer). Three bounds: holds (MaxAckPending)
// bounds the messages fetched and not yet settled, workers bounds the handlers running, and a
// lane per key lets one of its messages run at a time.
//
// A lane awaiting a redelivery never starves the fetch it needs: JetStream keeps a NAKed
// message pending (it counts against MaxAckPending) and hands out redeliveries even at the
// limit, while this side frees the NAKed message's hold, so with holds = MaxAckPending a hold
// is free whenever a redelivery is due. (With MaxAckPending -1 the holds can all be taken by
// messages behind awaiting lanes; each lane then goes on at its give-up time.)
func (c *Consumer) consumeKeyed(ctx context.Context, handler queue.Handler) error {
	hold := c.cfg.MaxAckPending
	if hold < 0 {
		hold = DefaultLookahead * c.cfg.Workers // no server limit: hold as the default would
	}
	d := &dispatcher{c: c, ctx: ctx, handler: handler, holds: make(chan struct{}, hold),
		workers: make(chan struct{}, c.cfg.Workers), lanes: map[string]*lane{}}
	defer d.stop()
	for ctx.Err() == nil {
		n := d.reserve()
		if n == 0 {
			break // ctx ended while every hold was taken
		}
		batch, err := c.cons.Fetch(n, jetstream.FetchMaxWait(keyedFetchWait))
		if err != nil {
			d.unreserve(n)
			if fatal(err) {
				return fmt.Errorf("consumer %s: %w", c.cfg.Durable, err)
			}
			c.pause(ctx)
			continue
		}
		got := 0
		for m := range batch.Messages() {
			got++
			d.admit(m)
		}
		d.unreserve(n - got)
		if err := c.fetchEnded(ctx, batch.Error()); err != nil {
			return err
		}
	}
	return nil
}

// keyedFetchWait bounds one pull request of consumeKeyed. A pull is not cancelled with ctx but
// waited out: a pull abandoned with messages on their way leaves them delivered to nobody until
// AckWait (nats.go closes a Fetch's channel before it unsubscribes), and JetStream would hand the
// messages released at stop to the abandoned pull. So stopping takes up to this long, and an idle
// consumer sends one pull request per this long.
const keyedFetchWait = 2 * time.Second

// dispatcher hands fetched messages to their keys' lanes.
type dispatcher struct {
	c       *Consumer
	ctx     context.Context
	handler queue.Handler
	holds   chan struct{} // a token per message held (fetched, not settled)
	workers chan struct{} // a token per handler running

	mu      sync.Mutex
	lanes   map[string]*lane // keys with messages held or a redelivery awaited
	stopped bool
	wg      sync.WaitGroup // lane goroutines
}

// lane is one key's messages, in the order they run.
type lane struct {
	key     string
	queue   []*held
	running bool // a goroutine (drain) is running the queue
	// awaiting is the stream sequence of this key's message NAKed for redelivery (0: none); the
	// lane holds its queue until that message comes back, or until giveUp fires.
	awaiting uint64
	giveUp   *time.Timer
	// inProcess is the stream sequence of the message being processed (0: none); back says its
	// redelivery was admitted before drain saw the NAK (a NAK without delay comes back at once).
	inProcess uint64
	back      bool
}

// held is a message in a lane, its ack deadline kept moving until it is settled.
type held struct {
	m         jetstream.Msg
	seq       uint64
	stopAlive func()
}

// reserve blocks for one free hold, then takes every other free one without waiting; it returns
// how many it took (0 once ctx ends).
func (d *dispatcher) reserve() int {
	select {
	case d.holds <- struct{}{}:
	case <-d.ctx.Done():
		return 0
	}
	n := 1
	for n < cap(d.holds) {
		select {
		case d.holds <- struct{}{}:
			n++
			continue
		default:
		}
		break
	}
	return n
}

func (d *dispatcher) unreserve(n int) {
	for range n {
		<-d.holds
	}
}

// admit puts a fetched message at the end of its key's lane, or at the front when it is the
// redelivery the lane awaits, and starts the lane if it is idle.
func (d *dispatcher) admit(m jetstream.Msg) {
	md, err := m.Metadata()
	if err != nil {
		d.c.log.Error("message without JetStream metadata; terminating it", "err", err)
		_ = m.Term()
		d.unreserve(1)
		return
	}
	key := d.key(message(m, md))
	h := &held{m: m, seq: md.Sequence.Stream, stopAlive: d.c.keepAlive(m)}
	d.mu.Lock()
	defer d.mu.Unlock()
	l := d.lanes[key]
	if l == nil {
		l = &lane{key: key}
		d.lanes[key] = l
	}
	switch {
	case l.awaiting != 0 && l.awaiting == h.seq:
		l.queue = append([]*held{h}, l.queue...)
		l.awaiting = 0
		l.giveUp.Stop()
	case l.inProcess != 0 && l.inProcess == h.seq:
		l.queue = append([]*held{h}, l.queue...)
		l.back = true
	default:
		l.queue = append(l.queue, h)
	}
	d.startLocked(l)
}

// key runs the configured Key; a panic in it is the key "" rather than a dead consumer.
func (d *dispatcher) key(msg queue.Message) (key string) {
	if d.c.cfg.Key == nil {
		return ""
	}
	defer func() {
		if r := recover(); r != nil {
			d.c.log.Error("ordering key panicked; using the key \"\"", "id", msg.ID, "panic", r)
			key = ""
		}
	}()
	return d.c.cfg.Key(msg)
}

// startLocked starts a goroutine on l's queue unless one runs, the lane awaits a redelivery, or
// the dispatcher stopped. d.mu is held.
func (d *dispatcher) startLocked(l *lane) {
	if l.running || l.awaiting != 0 || len(l.queue) == 0 || d.stopped {
		return
	}
	l.running = true
	d.wg.Add(1)
	go d.drain(l)
}

// drain runs l's messages one at a time, each with a worker token, until the queue is empty or
// a message is NAKed for redelivery (then the lane waits for it: awaitLocked).
func (d *dispatcher) drain(l *lane) {
	defer d.wg.Done()
	for {
		d.mu.Lock()
		if d.stopped {
			d.releaseLocked(l)
		}
		if len(l.queue) == 0 || l.awaiting != 0 {
			l.running = false
			d.forgetLocked(l)
			d.mu.Unlock()
			return
		}
		h := l.queue[0]
		l.queue = l.queue[1:]
		l.inProcess, l.back = h.seq, false
		d.mu.Unlock()

		// No ctx select: a handler running when ctx ends returns soon, and process releases a
		// message it is given after ctx ended without running it.
		d.workers <- struct{}{}
		out := d.c.process(d.ctx, h.m, d.handler, true)
		<-d.workers
		h.stopAlive()
		<-d.holds // the server still counts a NAKed message pending; its redelivery needs no hold

		d.mu.Lock()
		if out.redeliver && !l.back && !d.stopped && d.ctx.Err() == nil {
			d.awaitLocked(l, h.seq, out.delay)
		}
		l.inProcess, l.back = 0, false
		d.mu.Unlock()
	}
}

// awaitLocked makes l wait for the redelivery of its message seq: the messages behind it stay
// held until it comes back (admit) or until its delay plus AckWait has passed without it (it
// went to another Consume call on the durable, or JetStream lost track of it), after which the
// lane goes on without it. d.mu is held.
func (d *dispatcher) awaitLocked(l *lane, seq uint64, delay time.Duration) {
	l.awaiting = seq
	l.giveUp = time.AfterFunc(delay+d.c.cfg.AckWait, func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		if l.awaiting != seq {
			return
		}
		d.c.log.Warn("redelivery did not come back in time; running the messages behind it",
			"streamSeq", seq, "held", len(l.queue))
		l.awaiting = 0
		d.startLocked(l)
		d.forgetLocked(l)
	})
}

// forgetLocked drops an idle, empty lane that awaits nothing. d.mu is held.
func (d *dispatcher) forgetLocked(l *lane) {
	if !l.running && l.awaiting == 0 && len(l.queue) == 0 && d.lanes[l.key] == l {
		delete(d.lanes, l.key)
	}
}

// stop ends the dispatcher once Consume's loop has: lanes that are running release their queued
// messages themselves (process NAKs a message after ctx ended); idle lanes, those awaiting a
// redelivery, release theirs here. It returns when every lane goroutine has.
func (d *dispatcher) stop() {
	d.mu.Lock()
	d.stopped = true
	for _, l := range d.lanes {
		if l.giveUp != nil {
			l.giveUp.Stop()
		}
		if !l.running {
			d.releaseLocked(l)
		}
	}
	d.mu.Unlock()
	d.wg.Wait()
}

// releaseLocked NAKs l's queued messages (without delay: another worker may take them now)
// and frees their holds. d.mu is held.
func (d *dispatcher) releaseLocked(l *lane) {
	for _, h := range l.queue {
		_ = h.m.Nak()
		h.stopAlive()
		<-d.holds
	}
	l.queue = nil
}
