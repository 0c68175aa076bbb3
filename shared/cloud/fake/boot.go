package fake

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/dovetail-dev/dovetail/shared/cloud"
)

// DefaultTickInterval is how often Run calls Tick when given no interval.
const DefaultTickInterval = 100 * time.Millisecond

// Tick advances every instance to where the clock says it should be, in instance-ID order:
//
//   - a spot instance past its interruption's reclaim time starts shutting down;
//   - a pending instance BootDelay after launch becomes running, and its Node is registered
//     through the Registrar (a failed registration is retried on the next Tick);
//   - a shutting-down instance TerminateDelay after deletion becomes terminated, and its Node is
//     removed if the Registrar is also a NodeDeregistrar.
//
// The registrar is called outside the fake's lock. Errors from it are joined and returned; the
// states still advance.
func (c *Cloud) Tick(ctx context.Context) error {
	type registration struct {
		inst *instance
		node *corev1.Node
	}
	var (
		toRegister   []registration
		toDeregister []string
		errs         []error
	)

	c.mu.Lock()
	now := c.clock.Now()
	ids := make([]string, 0, len(c.instances))
	for id := range c.instances {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		inst := c.instances[id]
		if !inst.reclaimAt.IsZero() && !now.Before(inst.reclaimAt) {
			c.shutDown(inst)
		}
		if inst.State == cloud.StatePending && !now.Before(inst.bootAt) {
			inst.State = cloud.StateRunning
		}
		if inst.State == cloud.StateShuttingDown && !now.Before(inst.terminateAt) {
			inst.State = cloud.StateTerminated
			if inst.registered && inst.nodeName != "" {
				toDeregister = append(toDeregister, inst.nodeName)
			}
		}
		if inst.State == cloud.StateRunning && !inst.registered && !inst.registering && !inst.neverJoins && !inst.awaitsProvisioning && inst.nodeName != "" && c.registrar != nil {
			node, err := c.nodeOf(inst, now)
			if err != nil {
				errs = append(errs, fmt.Errorf("instance %s: %w", inst.ID, err))
				continue
			}
			inst.registering = true
			toRegister = append(toRegister, registration{inst: inst, node: node})
		}
	}
	c.mu.Unlock()

	for _, r := range toRegister {
		err := c.registrar.RegisterNode(ctx, r.node)
		c.mu.Lock()
		r.inst.registering = false
		if err != nil {
			errs = append(errs, fmt.Errorf("registering node %s of %s: %w", r.node.Name, r.inst.ID, err))
		} else {
			r.inst.registered = true
			c.stats.Registrations++
			// Terminated while we were registering: take the Node away again.
			if r.inst.State == cloud.StateTerminated {
				toDeregister = append(toDeregister, r.inst.nodeName)
			}
		}
		c.mu.Unlock()
	}
	if d, ok := c.registrar.(NodeDeregistrar); ok {
		for _, name := range toDeregister {
			if err := d.DeregisterNode(ctx, name); err != nil {
				errs = append(errs, fmt.Errorf("deregistering node %s: %w", name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// nodeOf builds the Node the instance's kubelet registers. Called with c.mu held.
func (c *Cloud) nodeOf(inst *instance, now time.Time) (*corev1.Node, error) {
	it := c.catalog.Get(inst.InstanceType).ForAMIFamily(inst.settings.AMIFamily)
	return cloud.NodeFor(it, inst.Instance, cloud.NodeSpec{
		Name:           inst.nodeName,
		InternalIP:     inst.privateIP.String(),
		Region:         c.region,
		Labels:         inst.labels,
		Taints:         inst.taints,
		Settings:       &inst.settings,
		KubeletVersion: c.kubeletVersion,
		OSImage:        inst.osImage,
		Now:            now,
	})
}

// Run calls Tick every interval (DefaultTickInterval when interval <= 0) on the fake's clock until
// ctx is done, logging Tick's errors. Local dev mode runs it in a goroutine; tests call Tick.
func (c *Cloud) Run(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		interval = DefaultTickInterval
	}
	t := c.clock.NewTimer(interval)
	defer t.Stop()
	for {
		if err := c.Tick(ctx); err != nil && ctx.Err() == nil {
			c.logger.Warn("fake cloud tick", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			t.Reset(interval)
		}
	}
}
