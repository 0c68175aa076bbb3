package fake

import (
	"context"
	"sort"
	"time"

	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/cloud"
)

// This file holds the read-outs and the one effect the EC2-compatible HTTP face of the fake
// (shared/cloud/fake/ec2api) needs beyond the cloud.Provider interface.

// InstanceRecord is an instance as DescribeInstances shows it: the public view plus its network
// identity.
type InstanceRecord struct {
	cloud.Instance
	// PrivateIP is the instance's private IPv4 address ("" for instances added with AddInstance).
	PrivateIP string
	// PrivateDNSName is the EC2 IP name of PrivateIP (ip-10-0-0-4.ec2.internal), also the Node name.
	PrivateDNSName string
	// Listed is whether EC2 still shows the instance: always, until TerminatedVisibility after it
	// terminated (on the fake's clock).
	Listed bool
}

// TerminatedVisibility is how long EC2 keeps showing a terminated instance: "Recently terminated
// instances might appear in the returned results. This interval is usually less than one hour"
// (EC2 API reference, DescribeInstances). After it, the instance ID is unknown
// (InvalidInstanceID.NotFound).
const TerminatedVisibility = time.Hour

// Records returns every instance, terminated ones included (Listed says whether EC2 would
// still show one), sorted by instance ID.
func (c *Cloud) Records() []InstanceRecord {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	out := make([]InstanceRecord, 0, len(c.instances))
	for _, inst := range c.instances {
		// An instance added terminated (AddInstance) has no termination time: shown, as recent.
		listed := inst.State != cloud.StateTerminated || inst.terminateAt.IsZero() || now.Before(inst.terminateAt.Add(TerminatedVisibility))
		r := InstanceRecord{Instance: inst.snapshot(), PrivateDNSName: inst.nodeName, Listed: listed}
		if inst.privateIP.IsValid() {
			r.PrivateIP = inst.privateIP.String()
		}
		out = append(out, r)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].ID < out[b].ID })
	return out
}

// Terminate starts terminating an instance whatever its tags, as EC2's TerminateInstances does
// (the cluster-tag check is the provider's job, see Delete). It returns the state before the
// call. An unknown providerID wraps cloud.ErrNotFound.
func (c *Cloud) Terminate(ctx context.Context, providerID string) (previous string, err error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	inst, err := c.lookup(providerID)
	if err != nil {
		return "", err
	}
	previous = inst.State
	c.shutDown(inst)
	return previous, nil
}

// Catalog is the catalog the fake sells from.
func (c *Cloud) Catalog() *catalog.Catalog { return c.catalog }

// Cluster is the cluster the fake launches for.
func (c *Cloud) Cluster() string { return c.cluster }

// Region is the fake's region.
func (c *Cloud) Region() string { return c.region }
