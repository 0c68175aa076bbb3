//go:build !lambda.norpc

package interruption_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/dovetail-dev/dovetail/agent/scheduledevents"
	"github.com/dovetail-dev/dovetail/events/notices"
	"github.com/dovetail-dev/dovetail/functions/interruption"
	"github.com/dovetail-dev/dovetail/localdev/scenarios"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake"
	"github.com/dovetail-dev/dovetail/shared/queue"
	"github.com/dovetail-dev/dovetail/shared/queue/eventgrid"
	"github.com/dovetail-dev/dovetail/shared/queue/eventgrid/egtest"
	"github.com/dovetail-dev/dovetail/shared/runtime"
	"github.com/dovetail-dev/dovetail/shared/runtime/azfunctest"
)

// Azure Resource Notifications (the HealthResources system topic infra/azure subscribes the
// interruption function to, CloudEvents 1.0 delivery) reach the interruption function through the
// Azure Functions custom handler (shared/runtime; the Functions host is azfunctest, a mock at the
// edge) and act on AKS nodes the real Azure provider launched over the SDK fakes. The events are
// the recorded samples of shared/data/events/azure with the placeholder target (a VM, a VMSS
// instance) and the times replaced by the test's node and clock.

// newAzureEnv is two AKS spot nodes of D-family sizes (one 2-CPU pod each), launched by the
// provision function through the Azure provider, the AKSNodeClass resolved first.
func newAzureEnv(t *testing.T) *env {
	t.Helper()
	ctx, nc, pub := jetStream(t)
	w, err := scenarios.NewAzureWorld(scenarios.Start, 20*time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	family := apisv1.ImageFamilyUbuntu2204
	pool := apisv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: apisv1.NodePoolSpec{Template: apisv1.NodeClaimTemplate{
		Spec: apisv1.NodeClaimSpec{NodeClassRef: &apisv1.NodeClassReference{Group: apisv1.AzureGroup, Kind: apisv1.KindAKSNodeClass, Name: "default"},
			Requirements: []apisv1.NodeSelectorRequirementWithMinValues{
				{NodeSelectorRequirement: corev1.NodeSelectorRequirement{Key: apisv1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{"spot"}}},
				{NodeSelectorRequirement: corev1.NodeSelectorRequirement{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"Standard_D2s_v5", "Standard_D2as_v5", "Standard_D4s_v5"}}},
			}}}}}
	w.AddPools([]apisv1.NodePool{pool}, []apisv1.NodeClass{{AKS: &apisv1.AKSNodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: apisv1.AKSNodeClassSpec{ImageFamily: &family}}}})
	if err := w.Lifecycle(ctx); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"web-a", "web-b"} {
		w.AddPods(corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": "web"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", Controller: ptr(true)}}},
			Spec: corev1.PodSpec{
				Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
					TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}}},
				Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}}})
	}
	if _, err := w.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.Step(ctx, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	return envFor(ctx, t, nc, pub, w)
}

// recordedNotice is a recorded HealthResources event for the VM of providerID, happening at at.
func recordedNotice(t *testing.T, name, providerID string, at time.Time) json.RawMessage {
	t.Helper()
	b, err := os.ReadFile("../../events/notices/testdata/azure/" + name)
	if err != nil {
		t.Fatal(err)
	}
	var ev struct {
		Time string `json:"time"`
		Data struct {
			ResourceInfo struct {
				Properties struct {
					TargetResourceID string `json:"targetResourceId"`
				} `json:"properties"`
			} `json:"resourceInfo"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &ev); err != nil || ev.Time == "" || ev.Data.ResourceInfo.Properties.TargetResourceID == "" {
		t.Fatalf("%s: no time or targetResourceId (%v)", name, err)
	}
	s := strings.ReplaceAll(string(b), ev.Time, at.UTC().Format(time.RFC3339Nano))
	s = strings.ReplaceAll(s, ev.Data.ResourceInfo.Properties.TargetResourceID, strings.TrimPrefix(providerID, "azure://"))
	return json.RawMessage(s)
}

// functionsHost is the Functions host (azfunctest) in front of the interruption function's
// custom handler on its notices route; both are closed when the test ends.
func functionsHost(t *testing.T, e *env) *azfunctest.Host {
	t.Helper()
	custom := httptest.NewServer(runtime.AzureFunctionsHandler(e.h.Handle, runtime.AzureOptions{
		Routes: map[string]string{interruption.Component: queue.NoticesSubject(scenarios.Cluster)}, Source: interruption.Component,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}))
	t.Cleanup(custom.Close)
	host := azfunctest.NewHost(custom.URL, interruption.Component, runtime.DefaultTriggerBinding)
	t.Cleanup(host.Close)
	return host
}

// deliver pushes a batch as Event Grid does to the Functions host in front of the interruption
// function's custom handler; it returns the invocations' statuses by event id.
func deliver(t *testing.T, e *env, batch ...json.RawMessage) map[string]int {
	t.Helper()
	host := functionsHost(t, e)
	body, err := json.Marshal(batch)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(host.URL, "application/cloudevents-batch+json; charset=utf-8", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	out := map[string]int{}
	for _, inv := range host.Invocations() {
		out[inv.EventID] = inv.Status
	}
	return out
}

// TestAzureResourceNotifications: one batch of the recorded VirtualMachinePreempted annotation
// for one spot node and the recorded VirtualMachineDeallocationInitiated for the other. The
// preempted node's offering is marked for 3 minutes from the notice, a replacement is launched on
// another offering and the node is tainted and drained at once (the VM is already going); the
// deallocated node's NodeClaim is handed to the termination path. The preemption's invocation
// fails (500) so Event Grid delivers it again until the drain is done; the deallocation's succeeds.
func TestAzureResourceNotifications(t *testing.T) {
	e := newAzureEnv(t)
	snap := e.w.Snapshot()
	if len(snap.Nodes) != 2 {
		t.Fatalf("%d nodes, want 2 (one per pod, hostname anti-affinity)", len(snap.Nodes))
	}
	preempted, deallocated := snap.Nodes[0], snap.Nodes[1]
	it, err := e.w.Cloud.Interrupt(preempted.Spec.ProviderID, fake.KindAzurePreempt)
	if err != nil {
		t.Fatal(err)
	}
	e.snaps.Set(e.w.Snapshot())
	now := e.w.Clock.Now()
	var decisions []interruption.Decision
	e.h.OnDecision = func(d interruption.Decision) { decisions = append(decisions, d) }

	statuses := deliver(t, e,
		recordedNotice(t, "eventgrid_health_resource_annotated_spot_preempted_cloudevent.json", preempted.Spec.ProviderID, it.Time),
		recordedNotice(t, "eventgrid_health_resource_annotated_deallocation_cloudevent.json", deallocated.Spec.ProviderID, now))
	if statuses["00000000-0000-4000-8000-000000000062"] != http.StatusInternalServerError || statuses["00000000-0000-4000-8000-000000000061"] != http.StatusOK {
		t.Fatalf("invocations %v: want the preemption redelivered (500) until drained, the deallocation done (200)", statuses)
	}
	if len(decisions) != 2 || decisions[0].Action != "replace" || decisions[1].Action != "cleanup" {
		t.Fatalf("decisions %+v: want replace, cleanup", decisions)
	}
	cmds, kinds := e.kinds(t, 5)
	if kinds != "MarkOfferingsUnavailable,CreateNodeClaim,TaintNode,DrainNode,DeleteNodeClaim" {
		t.Fatalf("commands %s: want mark, replacement, taint, drain of the preempted node, then the deallocated node's NodeClaim deleted", kinds)
	}
	m := cmds[0].Unavailable[0]
	if m.InstanceType != preempted.Labels[corev1.LabelInstanceTypeStable] || m.Zone != preempted.Labels[corev1.LabelTopologyZone] || m.CapacityType != "spot" ||
		!m.Expires.Time.Equal(it.Time.Add(3*time.Minute)) {
		t.Fatalf("marked %+v, want the preempted node's offering until the notice + 3 min", m)
	}
	if repl := cmds[1].NodeClaim; repl.Labels[corev1.LabelInstanceTypeStable] == m.InstanceType && repl.Labels[corev1.LabelTopologyZone] == m.Zone {
		t.Fatalf("replacement %s landed on the preempted offering", repl.Name)
	}
	if cmds[2].NodeName != preempted.Name || cmds[3].NodeName != preempted.Name {
		t.Fatalf("taint and drain of %s/%s, want %s", cmds[2].NodeName, cmds[3].NodeName, preempted.Name)
	}
	var want string
	for _, nc := range snap.NodeClaims {
		if nc.Status.ProviderID == deallocated.Spec.ProviderID {
			want = nc.Name
		}
	}
	if nc := cmds[4].NodeClaim; want == "" || nc == nil || nc.Name != want {
		t.Fatalf("deleted NodeClaim %+v, want %q (%s's)", cmds[4].NodeClaim, want, deallocated.Name)
	}
}

// TestAzureScheduledEventsThroughEventGrid: the node's Scheduled Events publisher
// (agent/scheduledevents as --transport eventgrid runs it) polls an IMDS stand-in serving the
// fake cloud's Preempt document for one spot node, and publishes it wrapped in a CloudEvent
// through the real azeventgrid client to the notices topic (egtest, a mock at the edge: no Event
// Grid runs offline), whose push subscription delivers it to the Functions host (azfunctest) in
// front of the interruption function's custom handler. The function acts as on any preemption
// notice before NotBefore: the offering marked, a replacement launched, the node tainted and
// drained.
func TestAzureScheduledEventsThroughEventGrid(t *testing.T) {
	e := newAzureEnv(t)
	node := e.spotNode(t)
	it, err := e.w.Cloud.Interrupt(node.Spec.ProviderID, fake.KindAzurePreempt)
	if err != nil {
		t.Fatal(err)
	}
	e.snaps.Set(e.w.Snapshot())
	var decisions []interruption.Decision
	e.h.OnDecision = func(d interruption.Decision) { decisions = append(decisions, d) }

	host := functionsHost(t, e)
	eg := egtest.New()
	defer eg.Close()
	t.Setenv(eventgrid.EnvTopicKey, eg.Key)
	// One attempt: the preemption's invocation answers 500 until its drain is done, and Event
	// Grid's redeliveries are not what this test is about.
	eg.AddTopic("notices", egtest.PushSubscription{Name: "notices-interruption", Endpoint: host.URL, MaxDeliveryAttempts: 1})
	pub, err := eventgrid.Config{Cluster: scenarios.Cluster, NoticesTopicEndpoint: eg.TopicEndpoint("notices"),
		ClientOptions: azcore.ClientOptions{Transport: eg.Client()}}.Publisher()
	if err != nil {
		t.Fatal(err)
	}
	imds := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Metadata") != "true" {
			http.Error(w, "Required metadata header not specified", http.StatusBadRequest)
			return
		}
		_, _ = w.Write(scenarios.ScheduledEventsJSON(it, 1, "00000000-0000-4000-8000-000000000011"))
	}))
	defer imds.Close()
	p := &scheduledevents.Poller{URL: imds.URL, ResourceID: strings.TrimPrefix(node.Spec.ProviderID, "azure://"), Publisher: pub, Cluster: scenarios.Cluster, Node: node.Name}
	if ok, err := p.Poll(context.Background()); err != nil || !ok {
		t.Fatalf("poll: published %v, %v", ok, err)
	}
	cmds, kinds := e.kinds(t, 4)
	if kinds != "MarkOfferingsUnavailable,CreateNodeClaim,TaintNode,DrainNode" {
		t.Fatalf("commands %s: want mark, replacement, taint, drain", kinds)
	}
	if cmds[2].NodeName != node.Name || cmds[3].NodeName != node.Name {
		t.Fatalf("taint and drain of %s/%s, want %s", cmds[2].NodeName, cmds[3].NodeName, node.Name)
	}
	if len(decisions) != 1 || decisions[0].Action != "replace" {
		t.Fatalf("decisions %+v: want one replace", decisions)
	}
	if invs := host.Invocations(); len(invs) != 1 || !strings.HasPrefix(invs[0].EventID, "scheduled-events-") {
		t.Fatalf("invocations %+v: want the publisher's one event", invs)
	}
}

// Two VMs of one name: Azure preempts a VM named as one of the cluster's nodes but in another
// resource group (and, through Scheduled Events, one read by a VM of another resource group).
// Neither notice is about this cluster's node: both are acknowledged and nothing is marked,
// launched, tainted or drained. The same notices about the node's own resource ID act on it.
func TestAzureSameNamedVMElsewhereIsIgnored(t *testing.T) {
	e := newAzureEnv(t)
	node := e.spotNode(t)
	it, err := e.w.Cloud.Interrupt(node.Spec.ProviderID, fake.KindAzurePreempt)
	if err != nil {
		t.Fatal(err)
	}
	e.snaps.Set(e.w.Snapshot())
	ours := strings.TrimPrefix(node.Spec.ProviderID, "azure://")
	v, ok := notices.ParseAzureVMID(ours)
	if !ok {
		t.Fatalf("node providerID %q is not a VM resource ID", node.Spec.ProviderID)
	}
	elsewhere := v
	elsewhere.ResourceGroup = "rg-someone-else"
	var decisions []interruption.Decision
	e.h.OnDecision = func(d interruption.Decision) { decisions = append(decisions, d) }
	doc := scenarios.ScheduledEventsJSON(it, 1, "00000000-0000-4000-8000-000000000013")
	statuses := deliver(t, e,
		recordedNotice(t, "eventgrid_health_resource_annotated_spot_preempted_cloudevent.json", "azure://"+elsewhere.String(), it.Time),
		json.RawMessage(scenarios.ScheduledEventsCloudEvent(elsewhere.String(), "scheduled-events-elsewhere", doc, it.Time)))
	for id, st := range statuses {
		if st != http.StatusOK {
			t.Errorf("invocation %s answered %d, want 200 (acknowledged)", id, st)
		}
	}
	if len(decisions) != 2 {
		t.Fatalf("decisions %+v, want two", decisions)
	}
	for _, d := range decisions {
		if len(d.Nodes) != 0 || len(d.Marked) != 0 || len(d.Launched) != 0 {
			t.Errorf("notice %s acted on %v (marked %v, launched %d)", d.Notice.ID, d.Nodes, d.Marked, len(d.Launched))
		}
	}
	if got := e.cmds.All(); len(got) != 0 {
		t.Fatalf("%d commands for notices about other VMs, want none", len(got))
	}
	// The node's own: read by the node itself, the Scheduled Events notice replaces it.
	decisions = nil
	deliver(t, e, json.RawMessage(scenarios.ScheduledEventsCloudEvent(ours, "scheduled-events-ours", doc, it.Time)))
	if len(decisions) != 1 || decisions[0].Action != "replace" || len(decisions[0].Nodes) != 1 || decisions[0].Nodes[0] != node.Name {
		t.Fatalf("decisions %+v, want the node replaced", decisions)
	}
}
