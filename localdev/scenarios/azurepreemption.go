package scenarios

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dovetail-dev/dovetail/events/notices"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/cloud/azure"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake/azureapi"
)

// The fake Azure account of the scenarios (the team data's placeholders).
const (
	azureSubscription = "00000000-0000-0000-0000-000000000000"
	azureNodeRG       = "mc_rg-fake-nodes"
	azureSubnet       = "/subscriptions/" + azureSubscription + "/resourceGroups/rg-fake-vnet/providers/Microsoft.Network/virtualNetworks/aks-vnet/subnets/aks-subnet"
)

// NewAzureWorld is NewWorld on Azure: the embedded eastus catalog, and the real Azure provider
// (azure-sdk-for-go) against the fake cloud's Azure face, on the world's fake clock.
func NewAzureWorld(start time.Time, bootDelay time.Duration, out io.Writer) (*World, error) {
	cat, err := catalog.AzureRegionCatalog(catalog.AzureRegion)
	if err != nil {
		return nil, err
	}
	w := newWorld(start, cat, apisv1.KindAKSNodeClass, out)
	if w.err != nil {
		return nil, w.err
	}
	w.Cloud = fake.New(fake.Options{Catalog: cat, Cluster: Cluster, Clock: w.Clock, BootDelay: bootDelay, Registrar: w})
	face := azureapi.New(azureapi.Options{Cloud: w.Cloud, SubscriptionID: azureSubscription, ResourceGroup: azureNodeRG, Subnets: []string{azureSubnet}})
	p, err := azure.New(azure.Options{Cluster: Cluster, SubscriptionID: azureSubscription, ResourceGroup: azureNodeRG, Location: cat.Region,
		SubnetID: azureSubnet, Catalog: cat, Credential: &azfake.TokenCredential{}, ClientOptions: face.ClientOptions(),
		SSHPublicKey: "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQDdovetailfakekey dovetail-dev", PollInterval: time.Second,
		KubernetesVersion: strings.TrimPrefix(fake.DefaultKubeletVersion, "v"),
		Bootstrap:         azureapi.LocalBootstrap("https://kubernetes.default.svc")})
	if err != nil {
		w.Close()
		return nil, err
	}
	w.Provider = p
	return w, nil
}

// aksSpotPool is an AKS NodePool of D-family sizes, spot and on demand.
func aksSpotPool() apisv1.NodePool {
	pool := spotPool()
	pool.Spec.Template.Spec.NodeClassRef = &apisv1.NodeClassReference{Group: apisv1.AzureGroup, Kind: apisv1.KindAKSNodeClass, Name: "default"}
	pool.Spec.Template.Spec.Requirements = []apisv1.NodeSelectorRequirementWithMinValues{
		{NodeSelectorRequirement: corev1.NodeSelectorRequirement{Key: apisv1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{"spot", "on-demand"}}},
		{NodeSelectorRequirement: corev1.NodeSelectorRequirement{Key: apisv1.LabelSKUFamily, Operator: corev1.NodeSelectorOpIn, Values: []string{"D"}}},
		{NodeSelectorRequirement: corev1.NodeSelectorRequirement{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}}},
	}
	return pool
}

// aksBootDelay is the fake VMs' boot time in the AKS scenarios.
const aksBootDelay = 20 * time.Second

// aksSpotWorld is an Azure world with the D-family spot pool and an Ubuntu 22.04 AKSNodeClass,
// resolved.
func aksSpotWorld(out io.Writer) (*World, error) {
	w, err := NewAzureWorld(Start, aksBootDelay, out)
	if err != nil {
		return nil, err
	}
	family := apisv1.ImageFamilyUbuntu2204
	if err := w.AddPools([]apisv1.NodePool{aksSpotPool()}, []apisv1.NodeClass{{AKS: &apisv1.AKSNodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: apisv1.AKSNodeClassSpec{ImageFamily: &family}}}}); err != nil {
		w.Close()
		return nil, err
	}
	// The lifecycle function resolves the AKSNodeClass (images, Kubernetes version, subnet) first:
	// the provision function launches nothing for a class without a Ready condition.
	if err := w.Lifecycle(context.Background()); err != nil {
		w.Close()
		return nil, err
	}
	return w, nil
}

// ScheduledEventsJSON renders a fake-cloud preemption as the IMDS Scheduled Events document the
// VM sees (GET /metadata/scheduledevents?api-version=2020-07-01; the shape of
// shared/data/events/azure/scheduled_events_preempt_spot.json), which the node's Scheduled Events
// DaemonSet publishes: one Preempt event for the VM, NotBefore the eviction time.
func ScheduledEventsJSON(n fake.Interruption, incarnation int, eventID string) []byte {
	doc := map[string]any{"DocumentIncarnation": incarnation, "Events": []map[string]any{{
		"EventId": eventID, "EventStatus": "Scheduled", "EventType": "Preempt", "ResourceType": "VirtualMachine",
		"Resources": []string{n.InstanceID}, "NotBefore": n.ReclaimTime.UTC().Format(time.RFC1123), "Description": "", "EventSource": "Platform",
		"DurationInSeconds": -1,
	}}}
	b, err := json.Marshal(doc)
	if err != nil {
		panic(fmt.Sprintf("scheduled events document: %v", err)) // a map of strings and ints always marshals
	}
	return b
}

// AzurePreemption runs the interruption scenario on AKS: 6 web pods (500m, 1 GiB, 30 s grace) on
// spot VMs launched through the Azure provider; Azure then preempts the spot VM holding the most
// pods with a Scheduled Events Preempt whose NotBefore is 30 s away (the minimum notice). The
// interruption function marks the offering unavailable, launches the replacement at once, taints
// the node and drains it (with 30 s of notice and 30 s of pod grace the drain starts at once);
// the replacement (boot delay 20 s here; a real AKS node takes longer, so on Azure the evicted
// pods wait pending for it) registers before NotBefore and the pods land there. Nothing is lost:
// every pod is evicted before the VM goes.
func AzurePreemption(ctx context.Context, out io.Writer) (*InterruptionResult, error) {
	w, err := aksSpotWorld(out)
	if err != nil {
		return nil, err
	}
	defer w.Close()
	return runInterruption(ctx, w, aksBootDelay, reclaim{kind: fake.KindAzurePreempt, who: "Azure", what: "Scheduled Events Preempt",
		notice: func(it fake.Interruption) []byte {
			// As the node's publisher sends it (agent/scheduledevents): read by the preempted VM.
			doc := ScheduledEventsJSON(it, 1, "00000000-0000-4000-8000-000000000011")
			return ScheduledEventsCloudEvent(strings.TrimPrefix(it.ProviderID, "azure://"), "scheduled-events-preempt", doc, it.Time)
		}})
}

// ScheduledEventsCloudEvent wraps a Scheduled Events document as the node's publisher does
// (notices.WrapScheduledEvents), read by the VM whose resource ID is reader.
func ScheduledEventsCloudEvent(reader, id string, doc []byte, at time.Time) []byte {
	b, err := notices.WrapScheduledEvents(Cluster, reader, id, doc, at)
	if err != nil {
		panic(fmt.Sprintf("scheduled events CloudEvent: %v", err)) // the document is JSON ScheduledEventsJSON rendered
	}
	return b
}

// EventGridPreemptedJSON renders a preemption as Event Grid pushes it from the HealthResources
// system topic: a one-event batch (CloudEvents 1.0) of a ResourceAnnotated event with annotation
// VirtualMachinePreempted for the VM (the shape of shared/data/events/azure/
// eventgrid_health_resource_annotated_spot_preempted_cloudevent.json).
func EventGridPreemptedJSON(n fake.Interruption, eventID string) []byte {
	vm := n.ProviderID[len("azure://"):]
	at := n.Time.UTC().Format(time.RFC3339Nano)
	ev := map[string]any{
		"id": eventID, "source": "/subscriptions/" + azureSubscription, "subject": vm, "specversion": "1.0", "time": at,
		"type": "Microsoft.ResourceNotifications.HealthResources.ResourceAnnotated",
		"data": map[string]any{
			"resourceInfo": map[string]any{
				"id": vm + "/providers/Microsoft.ResourceHealth/resourceAnnotations/" + eventID, "name": eventID, "type": "Microsoft.ResourceHealth/resourceAnnotations",
				"properties": map[string]any{"targetResourceId": vm, "targetResourceType": "Microsoft.Compute/virtualMachines", "occurredTime": at,
					"annotationName": "VirtualMachinePreempted", "reason": "Virtual machine preempted", "context": "Platform Initiated", "category": "Unplanned",
					"summary": "If you're running a Spot/Low Priority Virtual Machine, it has been preempted."},
			},
			"operationalInfo": map[string]any{"resourceEventTime": at}, "apiVersion": "2022-08-01",
		},
	}
	b, err := json.Marshal([]any{ev})
	if err != nil {
		panic(fmt.Sprintf("event grid batch: %v", err)) // maps of strings always marshal
	}
	return b
}

// AzureEventGridPreemption is AzurePreemption with the notice coming from Event Grid's
// VirtualMachinePreempted resource annotation instead of Scheduled Events: it reports the
// eviction as happening now, so the drain starts at once and the replacement is launched at the
// notice.
func AzureEventGridPreemption(ctx context.Context, out io.Writer) (*InterruptionResult, error) {
	w, err := aksSpotWorld(out)
	if err != nil {
		return nil, err
	}
	defer w.Close()
	return runInterruption(ctx, w, aksBootDelay, reclaim{kind: fake.KindAzurePreempt, who: "Azure", what: "Event Grid VirtualMachinePreempted",
		notice: func(it fake.Interruption) []byte {
			return EventGridPreemptedJSON(it, "00000000-0000-4000-8000-000000000062")
		}})
}
