package aksclass

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/cloud"
)

const (
	img1 = "/CommunityGalleries/AKSUbuntu-38d80f77-467a-481f-a8d4-09b6d4220bd2/images/2204gen2containerd/versions/202611.18.0"
	img2 = "/CommunityGalleries/AKSUbuntu-38d80f77-467a-481f-a8d4-09b6d4220bd2/images/2204gen2containerd/versions/202612.02.0"
	kid  = "6a2a1c8e-3f5e-4b1d-9c1e-0f6a7b8c9d0e"
)

func class() *apisv1.AKSNodeClass {
	family, disk := apisv1.ImageFamilyUbuntu2204, int32(128)
	return &apisv1.AKSNodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: apisv1.AKSNodeClassSpec{ImageFamily: &family, OSDiskSizeGB: &disk},
		Status: apisv1.AKSNodeClassStatus{Images: []apisv1.AKSNodeImage{{ID: img1}}, KubernetesVersion: "1.33.2",
			Conditions: []metav1.Condition{{Type: apisv1.ConditionImagesReady, Status: metav1.ConditionTrue}, {Type: apisv1.ConditionKubernetesVersionReady, Status: metav1.ConditionTrue}}}}
}

// launched returns a NodeClaim recorded by RecordLaunch for c on an instance booting img1, and
// its Node: kubelet v1.33.2, the kubelet identity label kid.
func launched(c *apisv1.AKSNodeClass) (*apisv1.NodeClaim, *corev1.Node) {
	nc := &apisv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-x"}}
	Rules{}.RecordLaunch(nc, apisv1.NodeClassOf(c), &cloud.Instance{ImageID: img1})
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "aks-default-x", Labels: map[string]string{apisv1.AKSLabelKubeletIdentityClientID: kid}},
		Status: corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{KubeletVersion: "v1.33.2"}}}
	return nc, node
}

// TestDriftRules: each of the provider's checks (pkg/cloudprovider/drift.go) on one change, in
// its order, with the cases it skips.
func TestDriftRules(t *testing.T) {
	r := Rules{KubeletIdentityClientID: kid}
	cases := []struct {
		name string
		edit func(c *apisv1.AKSNodeClass, nc *apisv1.NodeClaim, n *corev1.Node)
		want cloud.DriftReason
	}{
		{"unchanged", func(*apisv1.AKSNodeClass, *apisv1.NodeClaim, *corev1.Node) {}, ""},
		{"spec changed", func(c *apisv1.AKSNodeClass, _ *apisv1.NodeClaim, _ *corev1.Node) {
			c.Spec.Tags = map[string]string{"team": "web"}
		}, "NodeClassDrift"},
		{"spec changed, NodeClaim hashed by another rule version", func(c *apisv1.AKSNodeClass, nc *apisv1.NodeClaim, _ *corev1.Node) {
			c.Spec.Tags = map[string]string{"team": "web"}
			nc.Annotations[apisv1.AnnotationAKSNodeClassHashVersion] = "v3"
		}, ""},
		{"spec changed and image too: the hash is checked first", func(c *apisv1.AKSNodeClass, _ *apisv1.NodeClaim, _ *corev1.Node) {
			c.Spec.Tags = map[string]string{"team": "web"}
			c.Status.Images = []apisv1.AKSNodeImage{{ID: img2}}
		}, "NodeClassDrift"},
		{"control plane upgraded", func(c *apisv1.AKSNodeClass, _ *apisv1.NodeClaim, _ *corev1.Node) {
			c.Status.KubernetesVersion = "1.34.0"
		}, "K8sVersionDrift"},
		{"control plane version not ready", func(c *apisv1.AKSNodeClass, _ *apisv1.NodeClaim, _ *corev1.Node) {
			c.Status.KubernetesVersion = "1.34.0"
			c.Status.Conditions[1].Status = metav1.ConditionFalse
		}, ""},
		{"node reports no kubelet version", func(c *apisv1.AKSNodeClass, _ *apisv1.NodeClaim, n *corev1.Node) {
			c.Status.KubernetesVersion = "1.34.0"
			n.Status.NodeInfo.KubeletVersion = ""
		}, ""},
		{"kubelet identity replaced", func(_ *apisv1.AKSNodeClass, _ *apisv1.NodeClaim, n *corev1.Node) {
			n.Labels[apisv1.AKSLabelKubeletIdentityClientID] = "3824ff7a-93b6-40af-b861-2eb621ba437a"
		}, "KubeletIdentityDrift"},
		{"node without the identity label (launched before the provider wrote it)", func(_ *apisv1.AKSNodeClass, _ *apisv1.NodeClaim, n *corev1.Node) {
			delete(n.Labels, apisv1.AKSLabelKubeletIdentityClientID)
		}, ""},
		{"node being deleted is not read", func(c *apisv1.AKSNodeClass, _ *apisv1.NodeClaim, n *corev1.Node) {
			c.Status.KubernetesVersion = "1.34.0"
			n.DeletionTimestamp = &metav1.Time{}
		}, ""},
		{"new image version resolved", func(c *apisv1.AKSNodeClass, _ *apisv1.NodeClaim, _ *corev1.Node) {
			c.Status.Images = []apisv1.AKSNodeImage{{ID: img2}}
		}, "ImageDrift"},
		{"new image version, images not ready", func(c *apisv1.AKSNodeClass, _ *apisv1.NodeClaim, _ *corev1.Node) {
			c.Status.Images = []apisv1.AKSNodeImage{{ID: img2}}
			c.Status.Conditions[0].Status = metav1.ConditionFalse
		}, ""},
		{"NodeClaim without a recorded image", func(c *apisv1.AKSNodeClass, nc *apisv1.NodeClaim, _ *corev1.Node) {
			c.Status.Images = []apisv1.AKSNodeImage{{ID: img2}}
			nc.Status.ImageID = ""
		}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cl := class()
			nc, node := launched(cl)
			c.edit(cl, nc, node)
			if got := r.IsDrifted(nc, node, apisv1.NodeClassOf(cl)); got.Kind != c.want {
				t.Errorf("drift %+v, want %q", got, c.want)
			}
		})
	}
}

// TestUnresolvedClassRecordsNoImage: a class without status.images boots ".../versions/latest";
// that id is not recorded, so the node does not drift when the status resolves.
func TestUnresolvedClassRecordsNoImage(t *testing.T) {
	cl := class()
	cl.Status = apisv1.AKSNodeClassStatus{}
	nc := &apisv1.NodeClaim{}
	Rules{}.RecordLaunch(nc, apisv1.NodeClassOf(cl), &cloud.Instance{ImageID: "/CommunityGalleries/AKSUbuntu-38d80f77-467a-481f-a8d4-09b6d4220bd2/images/2204gen2containerd/versions/latest"})
	if nc.Status.ImageID != "" || nc.Annotations[apisv1.AnnotationAKSNodeClassHash] == "" {
		t.Errorf("image %q, annotations %v: want no image and the hash", nc.Status.ImageID, nc.Annotations)
	}
	if d := (Rules{}).IsDrifted(nc, nil, apisv1.NodeClassOf(class())); d.Kind != "" {
		t.Errorf("after the status resolved: drift %+v", d)
	}
}

// TestKubeletIdentityUnknown: without the deployment's identity (dovetail plan offline) the
// identity is not compared.
func TestKubeletIdentityUnknown(t *testing.T) {
	cl := class()
	nc, node := launched(cl)
	node.Labels[apisv1.AKSLabelKubeletIdentityClientID] = "3824ff7a-93b6-40af-b861-2eb621ba437a"
	if d := (Rules{}).IsDrifted(nc, node, apisv1.NodeClassOf(cl)); d.Kind != "" {
		t.Errorf("drift %+v, want none", d)
	}
}

// TestOtherKindsAreNotTheirs: an EC2NodeClass is neither recorded nor drifted by these rules.
func TestOtherKindsAreNotTheirs(t *testing.T) {
	ec2 := apisv1.NodeClassOf(&apisv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}})
	nc := &apisv1.NodeClaim{}
	Rules{}.RecordLaunch(nc, ec2, &cloud.Instance{ImageID: img1})
	if nc.Status.ImageID != "" || len(nc.Annotations) != 0 {
		t.Errorf("recorded %+v on an EC2NodeClass's NodeClaim", nc)
	}
	if d := (Rules{}).IsDrifted(nc, nil, ec2); d.Kind != "" {
		t.Errorf("drift %+v", d)
	}
}

// TestHashIgnoresSetOrder: the provider hashes slices as sets, so reordering the allowed unsafe
// sysctls changes nothing, while a new one does.
func TestHashIgnoresSetOrder(t *testing.T) {
	a, b := class(), class()
	a.Spec.Kubelet = &apisv1.AKSKubeletConfiguration{AllowedUnsafeSysctls: []string{"net.core.somaxconn", "kernel.msg*"}}
	b.Spec.Kubelet = &apisv1.AKSKubeletConfiguration{AllowedUnsafeSysctls: []string{"kernel.msg*", "net.core.somaxconn"}}
	if apisv1.AKSNodeClassHash(a) != apisv1.AKSNodeClassHash(b) {
		t.Error("order of allowedUnsafeSysctls changed the hash")
	}
	b.Spec.Kubelet.AllowedUnsafeSysctls = append(b.Spec.Kubelet.AllowedUnsafeSysctls, "net.ipv4.route.min_pmtu")
	if apisv1.AKSNodeClassHash(a) == apisv1.AKSNodeClassHash(b) {
		t.Error("a new allowed sysctl left the hash unchanged")
	}
}
