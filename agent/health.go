package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// Dependency is a service the agent cannot do its work without (the Kubernetes API server, the
// queue), probed every ProbeInterval so that an outage is logged and reported on /readyz
// instead of passing in silence (an informer retrying a list, a consumer retrying a fetch).
type Dependency struct {
	// Name says what it is in logs and on /readyz ("kubernetes API server", "NATS").
	Name string
	// Check returns nil when the dependency answers; its ctx carries the probe's deadline
	// (at most ProbeTimeout).
	Check func(ctx context.Context) error
}

const (
	// DefaultProbeInterval is how often every Dependency is probed.
	DefaultProbeInterval = 10 * time.Second
	// ProbeTimeout bounds one probe: a dependency that does not answer within it is unreachable.
	ProbeTimeout = 5 * time.Second
	// UnreachableLogInterval rate-limits the log of a dependency that stays unreachable: the
	// first failure is logged at once, then one line per interval until it answers again.
	UnreachableLogInterval = time.Minute
)

// health is the last probe result of each Dependency.
type health struct {
	mu    sync.Mutex
	state map[string]*depState
}

type depState struct {
	err     error
	since   time.Time // when the current failure began
	lastLog time.Time
}

// probeLoop probes every dependency at once and then every ProbeInterval until ctx ends.
func (a *Agent) probeLoop(ctx context.Context) {
	if len(a.cfg.Dependencies) == 0 {
		return
	}
	a.probe(ctx)
	t := a.cfg.Clock.NewTicker(a.cfg.ProbeInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			a.probe(ctx)
		}
	}
}

// probe checks each dependency once, logging a failure when it starts, at most once per
// UnreachableLogInterval while it lasts, and the recovery.
func (a *Agent) probe(ctx context.Context) {
	for _, d := range a.cfg.Dependencies {
		pctx, cancel := context.WithTimeout(ctx, min(ProbeTimeout, a.cfg.ProbeInterval))
		err := d.Check(pctx)
		cancel()
		if ctx.Err() != nil {
			return // stopping: a probe cut short says nothing about the dependency
		}
		now := a.cfg.Clock.Now()
		a.health.mu.Lock()
		s := a.health.state[d.Name]
		if s == nil {
			s = &depState{}
			a.health.state[d.Name] = s
		}
		switch {
		case err != nil && s.err == nil:
			s.err, s.since, s.lastLog = err, now, now
			a.log().Warn(d.Name+" unreachable; the agent publishes and applies nothing through it until it answers",
				"dependency", d.Name, "err", err)
		case err != nil:
			s.err = err
			if now.Sub(s.lastLog) >= UnreachableLogInterval {
				s.lastLog = now
				a.log().Warn(d.Name+" still unreachable", "dependency", d.Name, "for", now.Sub(s.since).Round(time.Second), "err", err)
			}
		case s.err != nil:
			a.log().Info(d.Name+" reachable again", "dependency", d.Name, "after", now.Sub(s.since).Round(time.Second))
			s.err = nil
		}
		a.health.mu.Unlock()
	}
}

// unreachable is nil when every dependency answered its last probe, else an error naming each
// one that did not, how long it has not, and its last error.
func (a *Agent) unreachable() error {
	a.health.mu.Lock()
	defer a.health.mu.Unlock()
	var msgs []string
	now := a.cfg.Clock.Now()
	for _, d := range a.cfg.Dependencies { // in configuration order: stable output
		if s := a.health.state[d.Name]; s != nil && s.err != nil {
			msgs = append(msgs, fmt.Sprintf("%s unreachable for %s: %v", d.Name, now.Sub(s.since).Round(time.Second), s.err))
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	return errors.New(strings.Join(msgs, "; "))
}
