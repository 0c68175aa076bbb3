//go:build !lambda.norpc

package provision

// The provision handler behind the Azure Functions custom handler (shared/runtime), fed by Event
// Grid push deliveries and sending its commands to an Event Grid namespace topic through the real
// azeventgrid and aznamespaces SDK clients. Event Grid and the Functions host are mocks at the
// edge (egtest, azfunctest: neither runs offline); dead letters go to Azurite (the real Blob
// protocol). VMs are made by the real Azure provider (shared/cloud/azure) through the real
// armcompute/armnetwork clients against the SDK's server fakes, answered by the fake cloud's
// Azure face over the embedded eastus catalog; only the token is fake.

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/messaging"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/eventgrid/azeventgrid"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	"github.com/dovetail-dev/dovetail/shared/cloud/azure"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake/azureapi"
	"github.com/dovetail-dev/dovetail/shared/queue"
	"github.com/dovetail-dev/dovetail/shared/queue/azureblob"
	"github.com/dovetail-dev/dovetail/shared/queue/azureblob/azuritetest"
	"github.com/dovetail-dev/dovetail/shared/queue/eventgrid"
	"github.com/dovetail-dev/dovetail/shared/queue/eventgrid/egtest"
	"github.com/dovetail-dev/dovetail/shared/runtime"
	"github.com/dovetail-dev/dovetail/shared/runtime/azfunctest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	azuritetest.StopShared()
	os.Exit(code)
}

// pendingPodEvent is a pods-pending event for one pod (1 CPU, 1 GiB) of the given name.
func pendingPodEvent(t *testing.T, name string, rev int64, pools []apisv1.NodePool, classes ...apisv1.NodeClass) []byte {
	t.Helper()
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}}}
	snap := &events.Snapshot{Cluster: cluster, Revision: rev, Time: metav1.NewTime(snapTime), PendingPods: []corev1.Pod{p}, NodePools: pools, NodeClasses: classes}
	id := "pods-pending-" + name
	data, err := events.NewEvent(cluster, "agent", events.TypePodsPending, id, &events.PodsPending{Pods: []string{"default/" + name}, Snapshot: snap})
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestAzureFunctionsPoisonDeadLetteredAndRedeliveryLaunchesOnce(t *testing.T) {
	az := azuritetest.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dlc := az.Container(ctx, t, "deadletters")

	eg := egtest.New()
	defer eg.Close()
	t.Setenv(eventgrid.EnvTopicKey, eg.Key)
	t.Setenv(eventgrid.EnvNamespaceKey, eg.Key)
	eg.AddNamespaceTopic(eventgrid.DefaultCommandsTopic, egtest.QueueSubscription{Name: eventgrid.DefaultCommandsSubscription})
	opts := azcore.ClientOptions{Transport: eg.Client()}
	pub, err := eventgrid.Config{Cluster: cluster, NamespaceEndpoint: eg.URL, ClientOptions: opts}.Publisher()
	if err != nil {
		t.Fatal(err)
	}

	azc := newAzureCloud(ctx, t)
	h := &Handler{Cluster: cluster, Catalog: azc.cat, NodeSettings: cloud.NodeSettingsFor, Provider: azc.p, Publisher: pub, Now: func() time.Time { return snapTime }}
	custom := httptest.NewServer(runtime.AzureFunctionsHandler(h.Handle, runtime.AzureOptions{
		Routes: map[string]string{Component: queue.EventsSubject(cluster)}, Source: Component,
		DeadLetters: &azureblob.DeadLetters{Container: dlc}, Logger: quiet()}))
	defer custom.Close()
	host := azfunctest.NewHost(custom.URL, Component, runtime.DefaultTriggerBinding)
	defer host.Close()
	sub := egtest.PushSubscription{Name: "provision", Endpoint: host.URL, MaxEventsPerBatch: 10, MaxDeliveryAttempts: 3}
	eg.AddTopic("events", sub)

	// One batch: a good event, a poison one (an event type this build does not know), a good one.
	poison := []byte(`{"specversion":"1.0","id":"bogus-1","source":"dovetail/test/agent","type":"dev.dovetail.bogus",` +
		`"datacontenttype":"application/json+zstd","dovetailschema":1,"time":"2026-11-30T12:00:00Z","data_base64":"AA=="}`)
	pools := []apisv1.NodePool{aksPool("a", "Standard_D2s_v5")}
	var batch []messaging.CloudEvent
	for _, raw := range [][]byte{pendingPodEvent(t, "web-0", 7, pools, azc.class), poison, pendingPodEvent(t, "web-1", 8, pools, azc.class)} {
		ce, err := eventgrid.ParseCloudEvent(raw)
		if err != nil {
			t.Fatal(err)
		}
		batch = append(batch, ce)
	}
	topic, err := azeventgrid.NewClientWithSharedKeyCredential(eg.TopicEndpoint("events"), azcore.NewKeyCredential(eg.Key),
		&azeventgrid.ClientOptions{ClientOptions: opts})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := topic.PublishCloudEvents(ctx, batch, nil); err != nil {
		t.Fatal(err)
	}
	eg.WaitDelivered()

	// The poison event's invocation succeeded (it is dead-lettered, not retried), so the batch
	// was delivered once and the two good events were processed once.
	invs := host.Invocations()
	if len(invs) != 3 {
		t.Fatalf("invocations %+v, want 3 (one delivery of the batch)", invs)
	}
	for _, inv := range invs {
		if inv.Status != 200 {
			t.Fatalf("invocation %+v, want 200", inv)
		}
	}
	if dl := eg.DeadLetters(); len(dl) != 0 {
		t.Fatalf("Event Grid dead-lettered %+v; the handler dead-letters poison itself", dl)
	}
	d := readDeadLetter(ctx, t, dlc, (&azureblob.DeadLetters{}).Name(azureblob.DeadLetter{Source: Component, EventID: "bogus-1"}))
	if !strings.Contains(d.Reason, "poison") || !strings.Contains(d.Reason, `"dev.dovetail.bogus"`) || d.Source != Component || d.EventID != "bogus-1" {
		t.Fatalf("dead letter %+v: want the reason naming the unknown type", d)
	}
	var ev map[string]any
	if err := json.Unmarshal(d.Event, &ev); err != nil || ev["id"] != "bogus-1" {
		t.Fatalf("dead letter keeps the event as delivered: %s", d.Event)
	}
	// One Standard_D2s_v5 VM (2 vCPUs, 8 GiB: one 1-CPU pod each beside the AKS reservations)
	// per good event, each with its NIC, made through ARM's API.
	first := instanceNames(ctx, t, azc.p)
	if len(first) != 2 || azc.fc.Stats().Launches != 2 || len(azc.srv.NICNames()) != 2 {
		t.Fatalf("VMs after the first delivery: %v (%d launched, NICs %v), want 2 (one per pending pod)", first, azc.fc.Stats().Launches, azc.srv.NICNames())
	}
	for _, n := range first {
		if vm, ok := azc.srv.VM(strings.SplitN(n, "/", 2)[0]); !ok || string(*vm.Properties.HardwareProfile.VMSize) != "Standard_D2s_v5" {
			t.Fatalf("VM %s: %v", n, ok)
		}
	}

	// Event Grid delivers the same batch again (at least once): no second VM for either pod.
	eg.Push("events", sub.Name, rawBatch(t, batch))
	if again := instanceNames(ctx, t, azc.p); strings.Join(again, ",") != strings.Join(first, ",") || azc.fc.Stats().Launches != 2 || len(azc.srv.NICNames()) != 2 {
		t.Fatalf("VMs after the redelivery: %v (%d launched, NICs %v), want the same %v", again, azc.fc.Stats().Launches, azc.srv.NICNames(), first)
	}
	if n := len(host.Invocations()); n != 6 {
		t.Fatalf("%d invocations, want 6 (the batch twice)", n)
	}

	// The agent pulls the CreateNodeClaim commands from the namespace topic: the same two
	// NodeClaims both times (names from the decision), so applying the duplicates changes nothing.
	claims := map[string]int{}
	for _, c := range pullCommands(ctx, t, eg, opts) {
		if c.Kind == events.CommandCreateNodeClaim {
			claims[c.NodeClaim.Name]++
		}
	}
	if len(claims) != 2 {
		t.Fatalf("CreateNodeClaim commands by NodeClaim: %v, want 2 NodeClaims", claims)
	}
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func rawBatch(t *testing.T, batch []messaging.CloudEvent) []json.RawMessage {
	t.Helper()
	out := make([]json.RawMessage, len(batch))
	for i, ce := range batch {
		b, err := json.Marshal(ce)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = b
	}
	return out
}

// azureCloud is the real Azure provider over the SDK fakes and the fake cloud's Azure face, with
// an Ubuntu 22.04 AKSNodeClass the provider has resolved (Ready: the provision function launches
// nothing for a class without it).
type azureCloud struct {
	cat   *catalog.Catalog
	fc    *fake.Cloud
	srv   *azureapi.Server
	p     *azure.Provider
	class apisv1.NodeClass
}

func newAzureCloud(ctx context.Context, t *testing.T) *azureCloud {
	t.Helper()
	const sub, rg = "00000000-0000-0000-0000-000000000000", "mc_rg-fake-nodes"
	const subnet = "/subscriptions/" + sub + "/resourceGroups/rg-fake-vnet/providers/Microsoft.Network/virtualNetworks/aks-vnet/subnets/aks-subnet"
	cat, err := catalog.AzureRegionCatalog("eastus")
	if err != nil {
		t.Fatal(err)
	}
	fc := fake.New(fake.Options{Catalog: cat, Cluster: cluster, Clock: clocktesting.NewFakeClock(snapTime)})
	srv := azureapi.New(azureapi.Options{Cloud: fc, SubscriptionID: sub, ResourceGroup: rg, Subnets: []string{subnet}})
	p, err := azure.New(azure.Options{Cluster: cluster, SubscriptionID: sub, ResourceGroup: rg, Location: "eastus", SubnetID: subnet,
		Catalog: cat, Credential: &azfake.TokenCredential{}, ClientOptions: srv.ClientOptions(), SSHPublicKey: "ssh-rsa AAAAB3NzaC1yc2E fake",
		PollInterval: 10 * time.Millisecond, KubernetesVersion: "1.33.2",
		Bootstrap: azureapi.LocalBootstrap("https://dev-dns-00000000.hcp.eastus.azmk8s.io:443")})
	if err != nil {
		t.Fatal(err)
	}
	family := apisv1.ImageFamilyUbuntu2204
	class, err := p.ResolveNodeClass(ctx, apisv1.NodeClassOf(&apisv1.AKSNodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: apisv1.AKSNodeClassSpec{ImageFamily: &family}}))
	if err != nil || len(class.Conditions()) == 0 || class.NotReady() != "" {
		t.Fatalf("resolving the AKSNodeClass: %v %q", err, class.NotReady())
	}
	return &azureCloud{cat: cat, fc: fc, srv: srv, p: p, class: class}
}

// aksPool is an on-demand NodePool of the given sizes over the AKSNodeClass "default".
func aksPool(name string, sizes ...string) apisv1.NodePool {
	return apisv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: apisv1.NodePoolSpec{
		Template: apisv1.NodeClaimTemplate{Spec: apisv1.NodeClaimSpec{
			NodeClassRef: &apisv1.NodeClassReference{Group: apisv1.AzureGroup, Kind: apisv1.KindAKSNodeClass, Name: "default"},
			Requirements: []apisv1.NodeSelectorRequirementWithMinValues{
				{NodeSelectorRequirement: corev1.NodeSelectorRequirement{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: sizes}},
				{NodeSelectorRequirement: corev1.NodeSelectorRequirement{Key: apisv1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}}},
			}}}}}
}

func instanceNames(ctx context.Context, t *testing.T, p cloud.Provider) []string {
	t.Helper()
	insts, err := p.List(ctx, cluster)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, i := range insts {
		names = append(names, i.ID+"/"+i.Tags[apisv1.TagNodeClaim])
	}
	sort.Strings(names)
	return names
}

func readDeadLetter(ctx context.Context, t *testing.T, c *container.Client, name string) azureblob.DeadLetter {
	t.Helper()
	resp, err := c.NewBlobClient(name).DownloadStream(ctx, nil)
	if err != nil {
		t.Fatalf("dead letter %s: %v", name, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var d azureblob.DeadLetter
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

// pullCommands receives every command sent so far through the agent's consumer (acknowledging each).
func pullCommands(ctx context.Context, t *testing.T, eg *egtest.Server, opts azcore.ClientOptions) []events.Command {
	t.Helper()
	rc, err := eventgrid.Config{Cluster: cluster, NamespaceEndpoint: eg.URL, ClientOptions: opts}.Receiver()
	if err != nil {
		t.Fatal(err)
	}
	cons, err := eventgrid.NewConsumer(eventgrid.ConsumerConfig{Receiver: rc, Subject: queue.CommandsSubject(cluster), Source: "agent", MaxWait: 10 * time.Second, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	cctx, stop := context.WithTimeout(ctx, 30*time.Second)
	defer stop()
	var out []events.Command
	err = cons.Consume(cctx, func(ctx context.Context, m queue.Message) error {
		env, err := events.Decode(m.Data)
		if err != nil {
			t.Errorf("command %s: %v", m.ID, err)
			return nil
		}
		c, err := events.Codec{}.Command(ctx, env)
		if err != nil {
			t.Errorf("command %s: %v", m.ID, err)
			return nil
		}
		out = append(out, *c)
		if eg.Pending(eventgrid.DefaultCommandsTopic, eventgrid.DefaultCommandsSubscription) <= 1 { // this one, until acknowledged
			stop()
		}
		return nil
	})
	if err != nil || len(out) == 0 {
		t.Fatalf("pulled %d commands (%v)", len(out), err)
	}
	return out
}
