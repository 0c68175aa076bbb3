package scenarios

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/functions/consolidate"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake"
	"github.com/dovetail-dev/dovetail/shared/disruption"
	"github.com/dovetail-dev/dovetail/shared/queue"
	"github.com/dovetail-dev/dovetail/shared/scheduling"
)

// ConsolidationResult is what the consolidation scenario ends with.
type ConsolidationResult struct {
	Before, After float64 // cluster $/h
	Decisions     int
	PodsBefore    int
	PodsAfter     int // workload pods still running (none may be lost)
}

// Consolidation scales a 24-replica web Deployment on six m5.xlarge nodes down to 6 replicas,
// then runs the consolidate function snapshot after snapshot until it has nothing left to do,
// printing what it decided and why and the cluster's $/h before and after. The function, the
// fake cloud and the codec are the real ones; the cluster is an in-process model in which a
// stand-in agent applies the commands (taint, drain: evicted pods are recreated on the first
// untainted node with room, as a Deployment and kube-scheduler would; delete) and the fake
// cloud's launches register as Ready nodes on the next snapshot.
func Consolidation(ctx context.Context, out io.Writer) (*ConsolidationResult, error) {
	cat, err := catalog.AWS()
	if err != nil {
		return nil, err
	}
	const clusterName = "dev"
	m := &model{cat: cat, now: time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC), rev: 1}
	m.cloud = fake.New(fake.Options{Catalog: cat, Cluster: clusterName, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	m.pool = defaultPool()
	for i := 0; i < 6; i++ {
		if err := m.addNode(fmt.Sprintf("node-%d", i), "m5.xlarge", "", nil); err != nil {
			return nil, err
		}
	}
	for i := 0; i < 24; i++ {
		m.addPod(fmt.Sprintf("web-%02d", i), fmt.Sprintf("node-%d", i%6))
	}
	res := &ConsolidationResult{Before: m.price()}
	fmt.Fprintf(out, "cluster: %d nodes, %d web pods (700m, 1Gi each), %.4f $/h\n", len(m.nodes), len(m.pods), res.Before)
	m.pods = m.pods[:6] // kubectl scale deployment web --replicas=6: the newest 18 pods go
	res.PodsBefore = len(m.pods)
	fmt.Fprintf(out, "scaled web down to %d replicas; consolidating\n", len(m.pods))

	pub := &recorder{}
	h := &consolidate.Handler{Cluster: clusterName, Catalog: cat, NodeSettings: cloud.NodeSettingsFor, Provider: m.cloud, Publisher: pub,
		Codec: events.Codec{Blobs: &events.MemoryBlobStore{}}, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Now: func() time.Time { return m.now }}
	for step := 0; step < 40; step++ {
		m.now = m.now.Add(30 * time.Second)
		m.rev++
		snap := m.snapshot(clusterName)
		data, err := h.Codec.NewEvent(ctx, clusterName, "agent", events.TypeSnapshot, fmt.Sprintf("snap-%d", m.rev), snap)
		if err != nil {
			return nil, err
		}
		var o consolidate.Outcome
		h.OnOutcome = func(x consolidate.Outcome) { o = x }
		if err := h.Handle(ctx, queue.Message{Data: data, Attempt: 1}); err != nil {
			return nil, err
		}
		if o.Decision != nil && o.Abandoned == "" {
			res.Decisions++
			fmt.Fprintf(out, "[rev %d] decided: %s\n         why: %s\n", m.rev, o.Decision, o.Decision.Why)
		}
		for _, p := range o.Progress {
			if p.Waiting != "" {
				fmt.Fprintf(out, "[rev %d] consolidation %s waits: %s\n", m.rev, p.ID, p.Waiting)
			}
		}
		cmds := pub.take(h)
		for _, c := range cmds {
			fmt.Fprintf(out, "[rev %d]   %s %s%s\n", m.rev, c.Kind, c.NodeName, claimName(c))
			if err := m.apply(c); err != nil {
				return nil, err
			}
		}
		if o.Decision == nil && len(o.Progress) == 0 && len(cmds) == 0 {
			fmt.Fprintf(out, "[rev %d] nothing more to consolidate (%v)\n", m.rev, o.Report.Tried)
			break
		}
	}
	res.After, res.PodsAfter = m.price(), len(m.pods)
	fmt.Fprintf(out, "after: %d nodes, %d web pods, %.4f $/h (was %.4f $/h, saves %.4f $/h)\n", len(m.nodes), res.PodsAfter, res.After, res.Before, res.Before-res.After)
	return res, nil
}

func claimName(c events.Command) string {
	if c.NodeClaim != nil {
		return c.NodeClaim.Name
	}
	return ""
}

// recorder is an in-process queue.Publisher for the scenario: it keeps what was published.
type recorder struct {
	mu   sync.Mutex
	data [][]byte
}

func (r *recorder) Publish(_ context.Context, _ string, _ string, data []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.data = append(r.data, data)
	return nil
}

func (r *recorder) take(h *consolidate.Handler) []events.Command {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []events.Command
	for _, d := range r.data {
		env, err := events.Decode(d)
		if err != nil {
			continue
		}
		if c, err := h.Codec.Command(context.Background(), env); err == nil {
			out = append(out, *c)
		}
	}
	r.data = nil
	return out
}

// model is the scenario's cluster.
type model struct {
	cat    *catalog.Catalog
	cloud  *fake.Cloud
	now    time.Time
	rev    int64
	pool   apisv1.NodePool
	nodes  []corev1.Node
	claims []apisv1.NodeClaim
	pods   []corev1.Pod
}

func defaultPool() apisv1.NodePool {
	after := apisv1.MustParseNillableDuration("0s")
	np := apisv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default", UID: "np-default"}}
	np.Spec.Template.Spec.Requirements = []apisv1.NodeSelectorRequirementWithMinValues{
		{NodeSelectorRequirement: corev1.NodeSelectorRequirement{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}}},
		{NodeSelectorRequirement: corev1.NodeSelectorRequirement{Key: apisv1.LabelInstanceCategory, Operator: corev1.NodeSelectorOpIn, Values: []string{"c", "m", "r"}}},
		{NodeSelectorRequirement: corev1.NodeSelectorRequirement{Key: apisv1.LabelInstanceGeneration, Operator: corev1.NodeSelectorOpGt, Values: []string{"4"}}},
		{NodeSelectorRequirement: corev1.NodeSelectorRequirement{Key: apisv1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}}},
	}
	np.Spec.Disruption = apisv1.Disruption{ConsolidationPolicy: apisv1.ConsolidationPolicyWhenEmptyOrUnderutilized, ConsolidateAfter: &after,
		Budgets: []apisv1.Budget{{Nodes: "50%"}}}
	return np
}

// addNode adds a Ready node; an existing instance (pid) is used when given, else one is put in
// the fake cloud.
func (m *model) addNode(name, it, pid string, claim *apisv1.NodeClaim) error {
	t := m.cat.Get(it)
	zone := "us-east-1a"
	if pid == "" {
		id := fmt.Sprintf("i-%017x", len(m.nodes)+len(m.claims)+1)
		if err := m.cloud.AddInstance(cloud.Instance{ID: id, Zone: zone, InstanceType: it, CapacityType: "on-demand",
			Tags: map[string]string{apisv1.TagCluster: "dev"}}); err != nil {
			return err
		}
		pid = cloud.AWSProviderID(zone, id)
	}
	labels := map[string]string{}
	for k, v := range t.Labels {
		labels[k] = v
	}
	ct := "on-demand"
	if claim != nil {
		zone, ct = claim.Labels[corev1.LabelTopologyZone], claim.Labels[apisv1.LabelCapacityType]
	}
	labels[corev1.LabelHostname], labels[corev1.LabelTopologyZone], labels[apisv1.LabelCapacityType], labels[apisv1.LabelNodePool] = name, zone, ct, "default"
	m.nodes = append(m.nodes, corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, UID: types.UID("uid-" + name), CreationTimestamp: metav1.NewTime(m.now)},
		Spec: corev1.NodeSpec{ProviderID: pid},
		Status: corev1.NodeStatus{Allocatable: t.Allocatable(), Capacity: t.Capacity,
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}})
	if claim == nil {
		claim = &apisv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "nc-" + name, UID: types.UID("nc-uid-" + name), Labels: map[string]string{apisv1.LabelNodePool: "default"}},
			Status: apisv1.NodeClaimStatus{ProviderID: pid}}
	}
	c := *claim
	c.Status.NodeName = name
	if c.UID == "" {
		c.UID = types.UID("nc-uid-" + c.Name)
	}
	m.claims = append(m.claims, c)
	return nil
}

func (m *model) addPod(name, node string) {
	ctrl := true
	st := metav1.NewTime(m.now.Add(-time.Hour))
	m.pods = append(m.pods, corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name), CreationTimestamp: st, Labels: map[string]string{"app": "web"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", UID: "rs-web", Controller: &ctrl}}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "web", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("700m"), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &st}})
}

func (m *model) snapshot(cluster string) *events.Snapshot {
	return &events.Snapshot{SchemaVersion: events.SnapshotSchemaVersion, Cluster: cluster, Revision: m.rev, Time: metav1.NewTime(m.now),
		NodePools: []apisv1.NodePool{m.pool}, Nodes: append([]corev1.Node(nil), m.nodes...),
		NodeClaims: append([]apisv1.NodeClaim(nil), m.claims...), Pods: append([]corev1.Pod(nil), m.pods...)}
}

func (m *model) price() float64 {
	var t float64
	for _, n := range m.nodes {
		it := m.cat.Get(n.Labels[corev1.LabelInstanceTypeStable])
		for _, o := range it.Offerings {
			if o.Zone == n.Labels[corev1.LabelTopologyZone] && o.CapacityType == n.Labels[apisv1.LabelCapacityType] {
				t += o.PricePerHour
			}
		}
	}
	return t
}

// apply is the stand-in agent.
func (m *model) apply(c events.Command) error {
	switch c.Kind {
	case events.CommandCreateNodeClaim:
		// The instance boots; its node registers Ready before the next snapshot.
		return m.addNode("node-"+c.NodeClaim.Name, c.NodeClaim.Labels[corev1.LabelInstanceTypeStable], c.NodeClaim.Status.ProviderID, c.NodeClaim)
	case events.CommandTaintNode:
		for i := range m.nodes {
			if m.nodes[i].Name == c.NodeName {
				m.nodes[i].Spec.Taints, _ = disruption.ApplyTaint(m.nodes[i].Spec.Taints, *c.Taint)
			}
		}
	case events.CommandDrainNode:
		for i := range m.pods {
			if m.pods[i].Spec.NodeName != c.NodeName {
				continue
			}
			target := m.schedule(&m.pods[i], c.NodeName)
			if target == "" {
				return fmt.Errorf("pod %s evicted from %s has no place: a consolidation invariant failed", m.pods[i].Name, c.NodeName)
			}
			m.pods[i].Spec.NodeName = target
		}
	case events.CommandDeleteNode:
		out := m.nodes[:0]
		for _, n := range m.nodes {
			if n.Name != c.NodeName {
				out = append(out, n)
			}
		}
		m.nodes = out
	case events.CommandDeleteNodeClaim:
		out := m.claims[:0]
		for _, nc := range m.claims {
			if nc.Name != c.NodeClaim.Name {
				out = append(out, nc)
			}
		}
		m.claims = out
	}
	return nil
}

// schedule is the stand-in kube-scheduler: the first untainted node (by name) with room.
func (m *model) schedule(p *corev1.Pod, not string) string {
	used := map[string]scheduling.Resources{}
	for i := range m.pods {
		used[m.pods[i].Spec.NodeName] = used[m.pods[i].Spec.NodeName].Add(scheduling.PodRequests(&m.pods[i]))
	}
	names := make([]string, 0, len(m.nodes))
	byName := map[string]*corev1.Node{}
	for i := range m.nodes {
		names = append(names, m.nodes[i].Name)
		byName[m.nodes[i].Name] = &m.nodes[i]
	}
	sort.Strings(names)
	req := scheduling.PodRequests(p)
	for _, name := range names {
		n := byName[name]
		if name == not || len(n.Spec.Taints) > 0 {
			continue
		}
		if req.Fits(scheduling.FromList(n.Status.Allocatable).Sub(used[name])) {
			return name
		}
	}
	return ""
}
