// Package cloudmetrics decorates a cloud.Provider with Karpenter's cloud provider metrics:
// karpenter_cloudprovider_duration_seconds and karpenter_cloudprovider_errors_total, labeled by
// controller, method and provider (and the error's class), as Karpenter's own decorator
// (sigs.k8s.io/karpenter pkg/cloudprovider/metrics) labels them.
package cloudmetrics

import (
	"context"
	"errors"
	"time"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	"github.com/dovetail-dev/dovetail/shared/telemetry"
)

// Error label values: Karpenter's well-known ones; any other error is "" (unknown).
const (
	ErrInsufficientCapacity = "InsufficientCapacityError"
	ErrNodeClaimNotFound    = "NodeClaimNotFoundError"
)

// Decorate returns p recording each call under controller. The result is a
// cloud.NodeClassResolver exactly when p is one, or decorates one (handlers look for it); the
// other optional interfaces (cloud.Repairer, NodeClassRules, ...) are found through Unwrap by
// cloud.As. A nil recorder returns p.
func Decorate(p cloud.Provider, rec telemetry.Recorder, controller string) cloud.Provider {
	if rec == nil || p == nil {
		return p
	}
	d := &decorated{p: p, rec: rec, controller: controller}
	if r, ok := cloud.As[cloud.NodeClassResolver](p); ok {
		return &resolving{decorated: d, r: r}
	}
	return d
}

type decorated struct {
	p          cloud.Provider
	rec        telemetry.Recorder
	controller string
}

// Unwrap returns the decorated provider.
func (d *decorated) Unwrap() cloud.Provider { return d.p }

func (d *decorated) observe(method string, start time.Time, err error) {
	d.rec.Record(telemetry.CloudProviderDuration, time.Since(start).Seconds(), d.controller, method, d.p.Name())
	if err == nil {
		return
	}
	class := ""
	var ice *cloud.InsufficientCapacityError
	switch {
	case errors.As(err, &ice):
		class = ErrInsufficientCapacity
	case errors.Is(err, cloud.ErrNotFound):
		class = ErrNodeClaimNotFound
	}
	d.rec.Record(telemetry.CloudProviderErrors, 1, d.controller, method, d.p.Name(), class)
}

func (d *decorated) Name() string { return d.p.Name() }

func (d *decorated) Create(ctx context.Context, req cloud.LaunchRequest) (*cloud.Instance, error) {
	start := time.Now()
	inst, err := d.p.Create(ctx, req)
	d.observe("Create", start, err)
	return inst, err
}

func (d *decorated) Delete(ctx context.Context, providerID string) error {
	start := time.Now()
	err := d.p.Delete(ctx, providerID)
	d.observe("Delete", start, err)
	return err
}

func (d *decorated) Get(ctx context.Context, providerID string) (*cloud.Instance, error) {
	start := time.Now()
	inst, err := d.p.Get(ctx, providerID)
	d.observe("Get", start, err)
	return inst, err
}

func (d *decorated) List(ctx context.Context, cluster string) ([]cloud.Instance, error) {
	start := time.Now()
	insts, err := d.p.List(ctx, cluster)
	d.observe("List", start, err)
	return insts, err
}

type resolving struct {
	*decorated
	r cloud.NodeClassResolver
}

func (d *resolving) ResolveNodeClass(ctx context.Context, nc apisv1.NodeClass) (apisv1.NodeClass, error) {
	start := time.Now()
	out, err := d.r.ResolveNodeClass(ctx, nc)
	d.observe("ResolveNodeClass", start, err)
	return out, err
}

func (d *resolving) ReleaseNodeClass(ctx context.Context, nc apisv1.NodeClass) error {
	start := time.Now()
	err := d.r.ReleaseNodeClass(ctx, nc)
	d.observe("ReleaseNodeClass", start, err)
	return err
}
