package main

import (
	"context"
	"fmt"
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	fakecr "sigs.k8s.io/controller-runtime/pkg/client/fake"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"

	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/cloudprovider"
	"sigs.k8s.io/karpenter/pkg/cloudprovider/fake"
	"sigs.k8s.io/karpenter/pkg/controllers/provisioning/scheduling"
	"sigs.k8s.io/karpenter/pkg/controllers/state"
	"sigs.k8s.io/karpenter/pkg/events"
	"sigs.k8s.io/karpenter/pkg/operator/injection"
	"sigs.k8s.io/karpenter/pkg/operator/logging"
	"sigs.k8s.io/karpenter/pkg/operator/options"
	"sigs.k8s.io/karpenter/pkg/test"
)

func init() {
	// Karpenter logs through controller-runtime's logger; the benchmark discards it too.
	crlog.SetLogger(logging.NopLogger)
}

// result is one solve of one side.
type result struct {
	Setup         time.Duration // building the scheduler's state before Solve (Karpenter only)
	Solve         time.Duration // the solve itself
	NodeClaims    int           // new NodeClaims of the plan
	Unschedulable int           // pods the plan leaves without a node
	PricePerHour  float64       // USD per hour of all new NodeClaims
	BoundPerHour  float64       // USD per hour, a lower bound on any plan (Dovetail only, else 0)
}

// karpenterContext is the context the benchmark solves in: the provisioner's controller name
// and Karpenter's test options.
func karpenterContext() context.Context {
	return options.ToContext(injection.WithControllerName(context.Background(), "provisioner"), test.Options())
}

// runKarpenter solves pods with Karpenter core's scheduler, set up as its benchmark sets it
// up: the fake cloud provider with the given instance types, an empty fake kube client, an
// empty cluster state, the real clock, a fake event recorder, no existing nodes, no DaemonSet
// pods, and the benchmark's NumConcurrentReconciles(5). The topology and scheduler are built
// before the clock starts (Setup); Solve is timed on its own, as the benchmark times it.
func runKarpenter(ctx context.Context, pods []*corev1.Pod, its []*cloudprovider.InstanceType, np *karpv1.NodePool, showErrors bool) (result, error) {
	opts := []scheduling.Options{scheduling.NumConcurrentReconciles(5)}
	cp := fake.NewCloudProvider()
	cp.InstanceTypes = its
	kube := fakecr.NewFakeClient()
	clk := &clock.RealClock{}
	cluster := state.NewCluster(clk, kube, cp)
	pools := []*karpv1.NodePool{np}
	typesByPool := map[string][]*cloudprovider.InstanceType{np.Name: its}

	start := time.Now()
	topology, err := scheduling.NewTopology(ctx, kube, cluster, nil, pools, typesByPool, pods, opts...)
	if err != nil {
		return result{}, fmt.Errorf("karpenter topology: %w", err)
	}
	s := scheduling.NewScheduler(ctx, kube, pools, cluster, nil, topology, typesByPool, nil,
		events.NewRecorder(&record.FakeRecorder{}), clk, nil, nil, opts...)
	setup := time.Since(start)

	start = time.Now()
	res, err := s.Solve(ctx, pods)
	solve := time.Since(start)
	if err != nil {
		return result{}, fmt.Errorf("karpenter solve: %w", err)
	}
	if showErrors {
		printPodErrors("karpenter", len(pods), karpenterErrors(res.PodErrors))
	}
	r := result{Setup: setup, Solve: solve, NodeClaims: len(res.NewNodeClaims), Unschedulable: len(res.PodErrors)}
	for _, nc := range res.NewNodeClaims {
		price, ok := karpenterLaunchPrice(nc)
		if !ok {
			return result{}, fmt.Errorf("karpenter NodeClaim with %d pods has no launchable offering", len(nc.Pods))
		}
		r.PricePerHour += price
	}
	return r, nil
}

// karpenterLaunchPrice is the price (USD per hour) of the instance Karpenter would launch for
// a NodeClaim: the cheapest launchable offering, over all its instance-type options, that the
// NodeClaim's requirements (zone, capacity type, ...) allow. Karpenter hands the options to the
// cloud provider's launch, which takes the cheapest (the fake cloud provider, and AWS's
// lowest-price/price-capacity-optimized fleet for on-demand, modulo spot capacity); this is the
// price Dovetail's first offering is compared against.
func karpenterLaunchPrice(nc *scheduling.NodeClaim) (float64, bool) {
	best := math.Inf(1)
	for _, it := range nc.InstanceTypeOptions {
		if o := it.Offerings.Launchable().Compatible(nc.Requirements).Cheapest(); o != nil && o.Price < best {
			best = o.Price
		}
	}
	return best, !math.IsInf(best, 1)
}

// karpenterErrors turns Karpenter's pod errors into pod name → reason.
func karpenterErrors(errs map[*corev1.Pod]error) map[string]string {
	out := make(map[string]string, len(errs))
	for p, err := range errs {
		out[p.Namespace+"/"+p.Name] = err.Error()
	}
	return out
}
