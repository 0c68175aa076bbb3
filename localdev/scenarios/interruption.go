package scenarios

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/functions/interruption"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake"
	"github.com/dovetail-dev/dovetail/shared/queue"
)

// Start is the scenarios' clock origin.
var Start = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// InterruptionResult is what the interruption scenario observed.
type InterruptionResult struct {
	Node            string    // the interrupted node
	Offering        string    // its offering (type/zone/capacity type)
	NoticeTime      time.Time // when EC2 gave the notice
	ReclaimTime     time.Time // when EC2 took the instance (notice + 2 min)
	ReplacementUp   time.Time // when the replacement node registered
	Replacement     string    // its offering
	DrainTime       time.Time // when the drain was asked for
	Evicted, Lost   int       // pods evicted by the drain; pods still on the node at the reclaim
	Bound, Total    int       // pods bound at the end
	DrainWhy        string
	MarkedOffering  bool // the interrupted offering was marked unavailable
	Deliveries      int  // notice deliveries until it was acknowledged
	ReplacementUsed bool // the replacement avoided the interrupted offering
}

// spotPool is a NodePool that allows spot and on-demand general-purpose types.
func spotPool() apisv1.NodePool {
	return apisv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default", UID: "pool-uid"}, Spec: apisv1.NodePoolSpec{
		Disruption: apisv1.Disruption{Budgets: []apisv1.Budget{{Nodes: "1"}}},
		Template: apisv1.NodeClaimTemplate{
			ObjectMeta: apisv1.ObjectMeta{Labels: map[string]string{"workload": "web"}},
			Spec: apisv1.NodeClaimSpec{
				NodeClassRef: &apisv1.NodeClassReference{Group: apisv1.AWSGroup, Kind: "EC2NodeClass", Name: "default"},
				Requirements: []apisv1.NodeSelectorRequirementWithMinValues{
					{NodeSelectorRequirement: corev1.NodeSelectorRequirement{Key: apisv1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{"spot", "on-demand"}}},
					{NodeSelectorRequirement: corev1.NodeSelectorRequirement{Key: apisv1.LabelInstanceFamily, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5", "m6i", "c5", "c6i"}}},
					{NodeSelectorRequirement: corev1.NodeSelectorRequirement{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}}},
				}}}}}
}

func defaultClass(ami string) apisv1.EC2NodeClass {
	return apisv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: apisv1.EC2NodeClassSpec{AMISelectorTerms: []apisv1.AMISelectorTerm{{Alias: "al2023@latest"}}, Role: "KarpenterNodeRole-dovetail-dev"},
		// The status the lifecycle function resolves (this World has no resolver): the AMI
		// and the instance profile made for spec.role.
		Status: apisv1.EC2NodeClassStatus{
			InstanceProfile: "dev_scenario",
			AMIs: []apisv1.AMI{{ID: ami, Name: "al2023-ami-" + ami, Requirements: []corev1.NodeSelectorRequirement{
				{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}}}}},
			SecurityGroups: []apisv1.SecurityGroup{{ID: "sg-0123456789abcdef0"}},
		}}
}

// webPods returns n pods of a Deployment "web", each requesting cpu and memory.
func webPods(n int, cpu, mem string, grace int64) []corev1.Pod {
	out := make([]corev1.Pod, 0, n)
	for i := 0; i < n; i++ {
		g := grace
		out = append(out, corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("web-%d", i), Namespace: "default", UID: types.UID(fmt.Sprintf("uid-web-%d", i)),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-7d9f", Controller: ptr(true)}}},
			Spec: corev1.PodSpec{TerminationGracePeriodSeconds: &g, Containers: []corev1.Container{{Name: "app", Image: "nginx", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}}}},
			Status: corev1.PodStatus{Phase: corev1.PodPending}})
	}
	return out
}

func ptr[T any](v T) *T { return &v }

// SpotNoticeJSON renders a fake-cloud interruption as the EventBridge event EC2 sends
// (fake.Interruption.SpotNoticeJSON).
func SpotNoticeJSON(n fake.Interruption, id string) []byte { return n.SpotNoticeJSON(id) }

// Interruption runs the spot-interruption scenario: 6 web pods (500m, 1 GiB, 30 s grace) are
// provisioned on spot capacity; EC2 then interrupts the spot node holding the most pods. The
// interruption function marks its offering unavailable, launches the replacement at once, taints
// the node, and drains it once the replacement has registered (boot delay 40 s), well before
// the reclaim 2 minutes after the notice. The notice is redelivered every 5 s while it waits
// (the transport's backoff). It prints every decision and returns what happened.
func Interruption(ctx context.Context, out io.Writer) (*InterruptionResult, error) {
	const bootDelay = 40 * time.Second
	w := NewWorld(Start, bootDelay, out)
	defer w.Close()
	if err := w.AddPools([]apisv1.NodePool{spotPool()}, []apisv1.NodeClass{{EC2: ptr(defaultClass("ami-0aaaaaaaaaaaaaaa1"))}}); err != nil {
		return nil, err
	}
	return runInterruption(ctx, w, bootDelay, reclaim{kind: fake.KindSpotInterruption, who: "EC2", what: "spot interruption warning",
		notice: func(it fake.Interruption) []byte { return SpotNoticeJSON(it, "00000000-0000-4000-8000-000000000001") }})
}

// reclaim says how the cloud takes a spot node back: the fake's interruption kind, and the notice
// message the interruption function receives for it.
type reclaim struct {
	kind      fake.InterruptionKind
	who, what string
	notice    func(fake.Interruption) []byte
}

// runInterruption provisions 6 web pods on the world's spot capacity, has the cloud reclaim the
// spot node with the most pods, and delivers the notice to the interruption function until it is
// acknowledged (every 5 s, the transport's backoff), then runs past the reclaim.
func runInterruption(ctx context.Context, w *World, bootDelay time.Duration, r reclaim) (*InterruptionResult, error) {
	if err := w.AddPods(webPods(6, "500m", "1Gi", 30)...); err != nil {
		return nil, err
	}
	d, err := w.Provision(ctx)
	if err != nil {
		return nil, err
	}
	for _, l := range d.Launched {
		w.printf("provision: launched %s %s/%s/%s for %d pods", l.NodeClaim.Name, l.Instance.InstanceType, l.Instance.Zone, l.Instance.CapacityType, len(l.Pods))
	}
	if err := w.Step(ctx, bootDelay); err != nil {
		return nil, err
	}
	victim, most := spotVictim(w.Snapshot())
	if victim == nil {
		return nil, errors.New("no spot node was provisioned")
	}
	res := &InterruptionResult{Node: victim.Name, Offering: offeringOf(victim)}
	it, err := w.Cloud.Interrupt(victim.Spec.ProviderID, r.kind)
	if err != nil {
		return nil, err
	}
	res.NoticeTime, res.ReclaimTime = it.Time, it.ReclaimTime
	w.printf("%s: %s for %s (%s, %d pods); reclaim at %s", r.who, r.what, victim.Name, res.Offering, most, it.ReclaimTime.Format("15:04:05"))
	if err := deliverNotice(ctx, w, res, queue.Message{ID: "notice-1", Subject: interruption.NoticesSubject(Cluster), Data: r.notice(it)}); err != nil {
		return res, err
	}
	w.Schedule()
	// Run on past the reclaim.
	for w.Clock.Now().Before(res.ReclaimTime.Add(10 * time.Second)) {
		if err := w.Step(ctx, 5*time.Second); err != nil {
			return res, err
		}
	}
	// The replacement is the node of the replacement's offering that registered after the notice
	// (on Azure the drain may start before it is up: the notice is too short to wait for it).
	for _, n := range w.Snapshot().Nodes {
		if at := w.Registered[n.Name]; n.Name != victim.Name && offeringOf(&n) == res.Replacement && at.After(res.NoticeTime) {
			res.ReplacementUp = at
		}
	}
	res.Evicted, res.Lost = w.Evictions, len(w.Lost)
	res.Bound, res.Total = w.PodsBound()
	res.ReplacementUsed = res.Replacement != "" && res.Replacement != res.Offering
	w.printf("result: replacement %s up at %s, drain at %s, reclaim at %s; %d pods evicted, %d lost; %d/%d pods bound",
		res.Replacement, fmtTime(res.ReplacementUp), fmtTime(res.DrainTime), res.ReclaimTime.Format("15:04:05"), res.Evicted, res.Lost, res.Bound, res.Total)
	return res, nil
}

// spotVictim is the spot node with the most pods.
func spotVictim(snap *events.Snapshot) (*corev1.Node, int) {
	var victim *corev1.Node
	most := -1
	for i := range snap.Nodes {
		n := &snap.Nodes[i]
		if n.Labels[apisv1.LabelCapacityType] != apisv1.CapacityTypeSpot {
			continue
		}
		c := 0
		for _, p := range snap.Pods {
			if p.Spec.NodeName == n.Name {
				c++
			}
		}
		if c > most {
			victim, most = n, c
		}
	}
	return victim, most
}

// deliverNotice hands the notice to the interruption function on the latest snapshot until it is
// acknowledged, stepping 5 s (the redelivery backoff) between deliveries, and records what it did.
func deliverNotice(ctx context.Context, w *World, res *InterruptionResult, msg queue.Message) error {
	latest := &interruption.LatestSnapshot{Cluster: Cluster}
	marked := map[string]bool{}
	h := &interruption.Handler{Cluster: Cluster, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Catalog: w.Catalog, NodeSettings: w.NodeSettings, Provider: w.Provider, Publisher: w, Snapshots: latest, Now: w.Clock.Now,
		OnDecision: func(d interruption.Decision) {
			w.printChanged(fmt.Sprintf("interruption %s %v", d.Action, d.Nodes), d.Why, "interruption: %s %v — %s", d.Action, d.Nodes, d.Why)
			for _, nc := range d.Launched {
				w.printf("interruption:   launched replacement %s (%s) before the reclaim", nc.Name, offeringOfLabels(nc.Labels))
				res.Replacement = offeringOfLabels(nc.Labels)
			}
			for _, m := range d.Marked {
				key := m.InstanceType + "/" + m.Zone + "/" + m.CapacityType
				if marked[key] {
					continue
				}
				marked[key] = true
				w.printf("interruption:   marked %s unavailable until %s (%s)", key, m.Expires.UTC().Format("15:04:05"), m.Reason)
				if key == res.Offering {
					res.MarkedOffering = true
				}
			}
			if d.Drained && res.DrainTime.IsZero() {
				res.DrainTime, res.DrainWhy = w.Clock.Now(), d.Why
			}
		}}
	for attempt := 1; ; attempt++ {
		latest.Set(w.Snapshot()) // the agent's latest snapshot
		msg.Attempt = attempt
		err := h.Handle(ctx, msg)
		res.Deliveries = attempt
		if err == nil {
			return nil
		}
		if !errors.Is(err, interruption.ErrAwaitingReplacement) && !errors.Is(err, interruption.ErrAwaitingSnapshot) &&
			!errors.Is(err, interruption.ErrAwaitingDrain) {
			return err
		}
		if attempt > 40 {
			return fmt.Errorf("notice still pending after %d deliveries: %w", attempt, err)
		}
		if err := w.Step(ctx, 5*time.Second); err != nil { // redelivery backoff
			return err
		}
	}
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return t.UTC().Format("15:04:05")
}

func offeringOf(n *corev1.Node) string { return offeringOfLabels(n.Labels) }

func offeringOfLabels(l map[string]string) string {
	return strings.Join([]string{l[corev1.LabelInstanceTypeStable], l[corev1.LabelTopologyZone], l[apisv1.LabelCapacityType]}, "/")
}
