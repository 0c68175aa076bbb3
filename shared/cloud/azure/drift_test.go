package azure_test

import (
	"context"
	"testing"
	"time"

	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	"github.com/dovetail-dev/dovetail/shared/cloud/azure"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake/azureapi"
	"github.com/dovetail-dev/dovetail/shared/disruption"
)

// TestImageVersionDriftsAnAKSNode: a node launched through the provider on the gallery's latest
// Ubuntu 22.04 Gen2 image (202611.18.0) records that image; once the gallery publishes
// 202612.02.0 and the class resolves to it, the node is drifted with the provider's reason
// "ImageDrift" (karpenter-provider-azure pkg/cloudprovider/drift.go), asked through the
// provider's rules as the drift function asks them (cloud.RulesOf). Before, it is not drifted.
func TestImageVersionDriftsAnAKSNode(t *testing.T) {
	w := newWorld(t, "prod")
	p := newProviderWith(t, w, func(o *azure.Options) { o.KubernetesVersion = "1.33.2" })
	class := resolveWith(t, p, nil)
	req := request("prod", "default-img01", onDemand1)
	req.NodeClass = apisv1.NodeClassOf(class)
	inst, err := p.Create(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	rules := cloud.RulesOf(p)
	if rules == nil {
		t.Fatal("the azure provider has no NodeClass rules")
	}
	nc := req.NodeClaim
	nc.Spec.NodeClassRef = &apisv1.NodeClassReference{Group: apisv1.AzureGroup, Kind: apisv1.KindAKSNodeClass, Name: "default"}
	rules.RecordLaunch(nc, req.NodeClass, inst)
	old := "/CommunityGalleries/" + azure.AKSUbuntuGallery + "/images/2204gen2containerd/versions/202611.18.0"
	if nc.Status.ImageID != old || nc.Annotations[apisv1.AnnotationAKSNodeClassHash] != apisv1.AKSNodeClassHash(class) ||
		nc.Annotations[apisv1.AnnotationAKSNodeClassHashVersion] != apisv1.AKSNodeClassHashVersion {
		t.Fatalf("recorded image %q, annotations %v", nc.Status.ImageID, nc.Annotations)
	}
	np := &apisv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: apisv1.NodePoolSpec{Template: apisv1.NodeClaimTemplate{
		Spec: apisv1.NodeClaimSpec{NodeClassRef: nc.Spec.NodeClassRef}}}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: inst.ID}, Status: corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{KubeletVersion: "v1.33.2"}}}
	if d := disruption.Drifted(nc, node, np, apisv1.NodeClassOf(class), rules); d.Kind != "" {
		t.Fatalf("just launched: drifted %+v", d)
	}

	// The same gallery a release later: the class resolves to 202612.02.0.
	later := append(append([]azureapi.ImageVersion(nil), azureapi.DefaultImageVersions...),
		azureapi.ImageVersion{Name: "202612.02.0", Published: time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)})
	cat := w.cloud.Catalog()
	srv := azureapi.New(azureapi.Options{Cloud: fake.New(fake.Options{Catalog: cat, Cluster: "prod"}), SubscriptionID: sub, ResourceGroup: rg,
		Subnets: []string{subnet}, ImageVersions: map[string][]azureapi.ImageVersion{"2204gen2containerd": later, "2204containerd": later}})
	p2, err := azure.New(azure.Options{Cluster: "prod", SubscriptionID: sub, ResourceGroup: rg, Location: "eastus", SubnetID: subnet,
		Catalog: cat, Credential: &azfake.TokenCredential{}, ClientOptions: srv.ClientOptions(), SSHPublicKey: "ssh-rsa AAAA fake",
		PollInterval: 10 * time.Millisecond, KubernetesVersion: "1.33.2", Bootstrap: azureapi.LocalBootstrap("https://example.invalid")})
	if err != nil {
		t.Fatal(err)
	}
	newer := resolveWith(t, p2, nil)
	d := disruption.Drifted(nc, node, np, apisv1.NodeClassOf(newer), rules)
	if d.Kind != "ImageDrift" { // the provider's ImageDrift reason, as Karpenter writes it on the Drifted condition
		t.Fatalf("after 202612.02.0: drift %+v, want ImageDrift", d)
	}
	if d.Field != "NodeClaim status.imageID (against the AKSNodeClass's status.images)" {
		t.Errorf("field %q", d.Field)
	}
}
