package localdev

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/functions/consolidate"
	"github.com/dovetail-dev/dovetail/functions/drift"
	"github.com/dovetail-dev/dovetail/functions/interruption"
	"github.com/dovetail-dev/dovetail/functions/lifecycle"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	lifecyclecore "github.com/dovetail-dev/dovetail/shared/lifecycle"
	"github.com/dovetail-dev/dovetail/shared/queue"
	dnats "github.com/dovetail-dev/dovetail/shared/queue/nats"
	"github.com/dovetail-dev/dovetail/shared/runtime"
)

// startDisruption runs the lifecycle, consolidate and drift functions as NATS workers on the
// events subject (durables "lifecycle", "consolidate" and "drift"; they act on the agent's
// snapshots: after node changes within a second, and every 30 s)
// and the interruption function on the notices subject (durable "interruption"), with the
// snapshot it needs followed from the events subject. All three use the provision function's
// cloud provider and the same publisher, as separate processes would use the same cloud and
// queue.
func (e *Env) startDisruption(ctx context.Context, nc *natsgo.Conn, pub queue.Publisher) error {
	o := e.Options
	codec := events.Codec{Blobs: e.blobs}
	cons := &consolidate.Handler{Cluster: o.Cluster, Catalog: e.Catalog, NodeSettings: e.NodeSettings, Policies: o.Policies, Provider: e.providerFor(consolidate.Component),
		Publisher: pub, Codec: codec, Log: o.Log, OnOutcome: e.Progress.Consolidation, Metrics: e.FunctionMetrics}
	dr := &drift.Handler{Cluster: o.Cluster, Catalog: e.Catalog, NodeSettings: e.NodeSettings, Policies: o.Policies, Provider: e.providerFor(drift.Component),
		Publisher: pub, Codec: codec, Log: o.Log, OnDecision: e.Progress.Drift, Metrics: e.FunctionMetrics}
	e.Snapshots = &interruption.LatestSnapshot{Cluster: o.Cluster, Codec: codec, Metrics: e.FunctionMetrics}
	in := &interruption.Handler{Cluster: o.Cluster, Catalog: e.Catalog, NodeSettings: e.NodeSettings, Policies: o.Policies, Provider: e.providerFor(interruption.Component),
		Publisher: pub, Codec: codec, Snapshots: e.Snapshots, Log: o.Log, MaxAttempts: interruption.MaxDeliveries, OnDecision: e.Progress.Interruption,
		Metrics: e.FunctionMetrics}
	lc := &lifecycle.Handler{Cluster: o.Cluster, Provider: e.providerFor(lifecycle.Component), Publisher: pub, Codec: codec, Log: o.Log, Metrics: e.FunctionMetrics,
		Options: lifecyclecore.Options{RegistrationTTL: o.RegistrationTTL, PricePerHour: lifecyclecore.CatalogPrice(e.Catalog), Catalog: e.Catalog}, OnDecision: e.Progress.Lifecycle, RefreshInterval: o.NodeClassRefresh,
		DisableRepair: o.DisableRepair}
	workers := []struct {
		durable, subject          string
		handle                    queue.Handler
		maxDeliver, maxAckPending int
	}{
		{lifecycle.Component, queue.EventsSubject(o.Cluster), lc.Handle, 0, 0},
		{consolidate.Component, queue.EventsSubject(o.Cluster), cons.Handle, 0, 0},
		{drift.Component, queue.EventsSubject(o.Cluster), dr.Handle, 0, 0},
		{interruption.Component, queue.NoticesSubject(o.Cluster), in.Handle, interruption.MaxDeliveries, interruption.MaxNoticesInFlight},
	}
	for _, w := range workers {
		c, err := dnats.NewConsumer(ctx, nc, e.consumer(w.durable, w.subject, w.maxDeliver, w.maxAckPending))
		if err != nil {
			return fmt.Errorf("%s function: %w", w.durable, err)
		}
		e.Functions = append(e.Functions, w.durable)
		handle := runtime.Instrument(w.durable, w.handle, e.FunctionMetrics, nil)
		if o.wrapFunction != nil {
			handle = o.wrapFunction(w.durable, handle)
		}
		e.goRun(func() error { return c.Consume(ctx, handle) })
	}
	e.goRun(func() error {
		err := dnats.Follow(ctx, nc, o.Cluster, queue.EventsSubject(o.Cluster), e.Snapshots.Observe, o.Log)
		if err != nil && !errors.Is(err, context.Canceled) {
			return fmt.Errorf("interruption function's snapshot feed: %w", err)
		}
		return nil
	})
	// provision consumes the events subject too (Start); named here so the line lists every function.
	e.Progress.Printf("functions: provision, %s on %s; %s on %s", strings.Join(e.Functions[:len(e.Functions)-1], ", "),
		queue.EventsSubject(o.Cluster), interruption.Component, queue.NoticesSubject(o.Cluster))
	return nil
}

// Lifecycle prints each NodeClaim's steps: Registered, Initialized, Draining, Terminating,
// RegistrationTimeout, and the instances terminated.
func (p *Progress) Lifecycle(x lifecycle.Outcome) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, t := range x.Transitions {
		if key := t.NodeClaim + "/" + t.Phase; p.steps[key] {
			continue
		} else {
			p.steps[key] = true
		}
		switch {
		case t.Node != "":
			p.printf("nodeclaim %s: %s (node %s) — %s", t.NodeClaim, t.Phase, t.Node, t.Detail)
		default:
			p.printf("nodeclaim %s: %s — %s", t.NodeClaim, t.Phase, t.Detail)
		}
	}
	for _, id := range x.Terminated {
		p.printf("lifecycle (revision %d): instance %s terminated, finalizers released", x.Revision, id)
	}
	for _, c := range x.NodeClassStatuses {
		if c.NodeClass == nil || c.NodeClass.EC2 == nil {
			continue
		}
		st := c.NodeClass.EC2.Status
		ready := "Unknown"
		if r := meta.FindStatusCondition(st.Conditions, apisv1.ConditionReady); r != nil {
			ready = string(r.Status)
		}
		line := fmt.Sprintf("lifecycle: EC2NodeClass %s Ready=%s: %d subnets, %d security groups, %d AMIs, instance profile %q",
			c.NodeClass.Name(), ready, len(st.Subnets), len(st.SecurityGroups), len(st.AMIs), st.InstanceProfile)
		if why := c.NodeClass.NotReady(); why != "" {
			line += " — " + why
		}
		p.printf("%s", line)
	}
	for _, name := range x.Released {
		p.printf("lifecycle: EC2NodeClass %s deleted, its instance profile released", name)
	}
}

// Consolidation prints what a consolidate invocation did, when it did something.
func (p *Progress) Consolidation(x consolidate.Outcome) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if x.Decision != nil {
		p.printf("consolidate (revision %d): %s — %s", x.Revision, x.Decision.String(), x.Decision.Why)
	}
	for _, l := range x.Launched {
		p.printf("consolidate (revision %d): launched replacement NodeClaim %s", x.Revision, l.Name)
	}
	for _, pr := range x.Progress {
		if pr.Waiting != "" {
			p.printf("consolidate (revision %d): %s waits: %s", x.Revision, pr.ID, pr.Waiting)
		}
	}
	for _, n := range x.Finished {
		p.printf("consolidate (revision %d): %s drained, its NodeClaim deleted (the lifecycle function terminates it)", x.Revision, n)
	}
	if x.Abandoned != "" {
		p.printf("consolidate (revision %d): abandoned: %s", x.Revision, x.Abandoned)
	}
}

// Drift prints a drift decision, one line per node.
func (p *Progress) Drift(d drift.Decision) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, line := range strings.Split(strings.TrimRight(d.String(), "\n"), "\n") {
		if line != "" {
			p.printf("drift (revision %d): %s", d.Revision, line)
		}
	}
}

// Interruption prints what a notice led to (waits for a snapshot included: they explain delays).
func (p *Progress) Interruption(d interruption.Decision) {
	p.mu.Lock()
	defer p.mu.Unlock()
	line := fmt.Sprintf("interruption: %s %s: %s", d.Notice.Kind, d.Notice.ID, d.Action)
	if len(d.Nodes) > 0 {
		line += " " + strings.Join(d.Nodes, ",")
	}
	if len(d.Launched) > 0 {
		names := make([]string, 0, len(d.Launched))
		for _, nc := range d.Launched {
			names = append(names, nc.Name)
		}
		line += "; launched " + strings.Join(names, ",")
	}
	if d.Drained {
		line += "; drain asked"
	}
	if !d.Notice.Deadline.IsZero() {
		line += fmt.Sprintf("; reclaim at %s", d.Notice.Deadline.UTC().Format(time.TimeOnly))
	}
	p.printf("%s — %s", line, d.Why)
}
