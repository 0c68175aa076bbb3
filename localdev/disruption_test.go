package localdev

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/events/notices"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	"github.com/dovetail-dev/dovetail/shared/disruption"
	"github.com/dovetail-dev/dovetail/shared/kube"
	"github.com/dovetail-dev/dovetail/shared/queue"
	dnats "github.com/dovetail-dev/dovetail/shared/queue/nats"
)

// The seed scenario with the disruption functions running beside provision (the in-memory
// cluster, the real embedded JetStream, the real agent): their durable consumers exist on the
// right subjects, and an EC2 spot interruption notice published on the notices subject for a
// node provision launched makes the interruption function taint that node, which the agent
// applies to the Node.
//
// The consolidate worker runs but only counts what it receives: on the snapshot this test
// publishes it may decide to replace the very node the notice names (its own tests cover that),
// and a node it tainted first is not tainted again by the interruption function.
func TestDisruptionFunctionsRunAndInterruptionTaintsTheNoticedNode(t *testing.T) {
	var consolidateSeen atomic.Int64
	env, out := startEnv(t, Options{wrapFunction: func(name string, h queue.Handler) queue.Handler {
		if name != "consolidate" {
			return h
		}
		return func(context.Context, queue.Message) error { consolidateSeen.Add(1); return nil }
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	if want := []string{"lifecycle", "consolidate", "drift", "interruption"}; !slices.Equal(env.Functions, want) {
		t.Fatalf("functions = %v, want %v", env.Functions, want)
	}
	nc, err := dnats.Connect(env.NATSURL, t.Name(), env.NATS.AdminOptions()...) // reads consumer info: no role may
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	for durable, subject := range map[string]string{"provision": queue.EventsSubject("dev"), "consolidate": queue.EventsSubject("dev"),
		"drift": queue.EventsSubject("dev"), "interruption": queue.NoticesSubject("dev")} {
		c, err := js.Consumer(ctx, dnats.StreamName("dev"), durable)
		if err != nil {
			t.Fatalf("consumer %s: %v", durable, err)
		}
		if got := c.CachedInfo().Config.FilterSubject; got != subject {
			t.Errorf("consumer %s filters %q, want %q", durable, got, subject)
		}
	}

	// The node provision launched that holds the most pods: the seed's pre-existing nodes have
	// no instance in the cloud, and an empty node would be the consolidate function's first pick.
	insts, err := env.Cloud.List(ctx, "dev")
	if err != nil {
		t.Fatal(err)
	}
	byPID := map[string]cloud.Instance{}
	for _, i := range insts {
		byPID[i.ProviderID] = i
	}
	nodes, err := env.Cluster.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pods, err := env.Cluster.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var node string
	var inst cloud.Instance
	most := 0
	for _, n := range nodes.Items {
		count := 0
		for _, p := range pods.Items {
			if p.Spec.NodeName == n.Name {
				count++
			}
		}
		if i, ok := byPID[n.Spec.ProviderID]; ok && count > most {
			node, inst, most = n.Name, i, count
		}
	}
	if node == "" {
		t.Fatalf("no node of the %d instances holds a pod", len(insts))
	}

	// The agent's periodic snapshot (published now rather than after 30 s) reaches the
	// interruption function's view through the events subject.
	if err := env.Agent.PublishSnapshot(ctx); err != nil {
		t.Fatal(err)
	}
	for {
		snap, _ := env.Snapshots.Latest(ctx)
		if snap != nil && slices.ContainsFunc(snap.Nodes, func(n corev1.Node) bool { return n.Name == node }) {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the followed snapshot never showed node %s", node)
		}
		time.Sleep(50 * time.Millisecond)
	}

	pub, err := dnats.NewPublisher(nc)
	if err != nil {
		t.Fatal(err)
	}
	// An EC2 Spot Instance Interruption Warning as EventBridge delivers it (AWS EC2 User Guide,
	// "Spot Instance interruption notices"): the reclaim is 2 minutes after its time.
	id := "0d0a3a39-5c29-4f0e-9c59-8f2c1d3f0a11"
	notice := fmt.Sprintf(`{"version":"0","id":%q,"detail-type":%q,"source":"aws.ec2","account":"123456789012","time":%q,"region":"us-east-1",`+
		`"resources":["arn:aws:ec2:us-east-1:123456789012:instance/%s"],"detail":{"instance-id":%q,"instance-action":"terminate"}}`,
		id, notices.DetailTypeSpotInterruption, time.Now().UTC().Format(time.RFC3339), inst.ID, inst.ID)
	if err := pub.Publish(ctx, queue.NoticesSubject("dev"), id, []byte(notice)); err != nil {
		t.Fatal(err)
	}
	// Its first command marks the interrupted offering unavailable (the agent keeps the mark in
	// its ConfigMap); after launching the replacement it taints the node
	// karpenter.sh/disrupted=interrupted:NoSchedule, which the agent applies to the Node.
	key, err := kube.OfferingMarkKey(events.UnavailableOfferingMark{OfferingKey: events.OfferingKey{InstanceType: inst.InstanceType, Zone: inst.Zone, CapacityType: inst.CapacityType}})
	if err != nil {
		t.Fatal(err)
	}
	var marked, tainted bool
	for !marked || !tainted {
		if ctx.Err() != nil {
			t.Fatalf("offering %s marked %v, node %s tainted %v\n%s", key, marked, node, tainted, out.String())
		}
		time.Sleep(100 * time.Millisecond)
		cm, err := env.Cluster.Kube.CoreV1().ConfigMaps(env.Options.Namespace).Get(ctx, kube.UnavailableOfferingsConfigMap, metav1.GetOptions{})
		marked = err == nil && strings.Contains(cm.Data[key], string(notices.KindSpotInterruption))
		n, err := env.Cluster.Kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		tainted = err == nil && slices.ContainsFunc(n.Spec.Taints, func(tt corev1.Taint) bool {
			return tt.Key == apisv1.TaintKeyDisrupted && tt.Value == disruption.TaintValueInterrupted && tt.Effect == corev1.TaintEffectNoSchedule
		})
	}
	if consolidateSeen.Load() == 0 {
		t.Error("the consolidate worker received no event")
	}
	// The progress output says what the function decided and why.
	if s := out.String(); !strings.Contains(s, "interruption: "+string(notices.KindSpotInterruption)+" "+id+": replace "+node) {
		t.Errorf("no interruption decision line for %s in:\n%s", node, s)
	}
}
