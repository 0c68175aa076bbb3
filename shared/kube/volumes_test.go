package kube

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/dovetail-dev/dovetail/events"
)

func withClaim(volume, claim string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: volume, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}})
	}
}

func pvc(ns, name, volume string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: corev1.PersistentVolumeClaimSpec{VolumeName: volume}}
}

func pv(name string, claimRef *corev1.ObjectReference, phase corev1.PersistentVolumePhase) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PersistentVolumeSpec{ClaimRef: claimRef},
		Status: corev1.PersistentVolumeStatus{Phase: phase}}
}

// The snapshot carries the claims its pods use, the volumes those claims are (pre-)bound to,
// unbound Available volumes, and every StorageClass; nothing else of the volume kinds.
func TestSnapshotVolumes(t *testing.T) {
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	objs := []runtime.Object{
		node("n1"),
		pod("default", "pending", "", withClaim("data", "data-0"), func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{
				Ephemeral: &corev1.EphemeralVolumeSource{VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{}}}})
		}),
		pod("shop", "running", "n1", withClaim("data", "db")),
		pod("default", "done", "n1", withClaim("data", "old"), func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }),
		pvc("default", "data-0", ""),          // used by the pending pod, unbound
		pvc("default", "pending-scratch", ""), // its ephemeral volume's claim
		pvc("shop", "db", "pv-db"),            // used by the running pod, bound
		pvc("default", "old", "pv-old"),       // only a terminal pod uses it
		pvc("default", "unused", ""),
		pv("pv-db", &corev1.ObjectReference{Namespace: "shop", Name: "db"}, corev1.VolumeBound),
		pv("pv-old", &corev1.ObjectReference{Namespace: "default", Name: "old"}, corev1.VolumeBound),
		pv("pv-prebound", &corev1.ObjectReference{Namespace: "default", Name: "data-0"}, corev1.VolumeAvailable),
		pv("pv-free", nil, corev1.VolumeAvailable),
		pv("pv-released", &corev1.ObjectReference{Namespace: "x", Name: "gone"}, corev1.VolumeReleased),
		&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "gp3"}, Provisioner: "ebs.csi.aws.com", VolumeBindingMode: &wffc},
		&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "efs"}, Provisioner: "efs.csi.aws.com"},
	}
	f := newFixture(t, objs)
	base := f.watcher.Revisions().Base()
	// 1 node + 3 pods + 5 PVCs + 5 PVs + 2 StorageClasses = 16 add events.
	eventually(t, "16 initial add events", func() bool { return f.watcher.Revision() == base+16 })
	snap, err := f.builder.Build()
	if err != nil {
		t.Fatal(err)
	}
	var claims, volumes, classes []string
	for _, c := range snap.PVCs {
		claims = append(claims, c.Namespace+"/"+c.Name)
	}
	for _, v := range snap.PVs {
		volumes = append(volumes, v.Name)
	}
	for _, c := range snap.StorageClasses {
		classes = append(classes, c.Name)
	}
	assertNames(t, "pvcs", claims, []string{"default/data-0", "default/pending-scratch", "shop/db"})
	assertNames(t, "pvs", volumes, []string{"pv-db", "pv-free", "pv-prebound"})
	assertNames(t, "storageClasses", classes, []string{"efs", "gp3"})
	if m := snap.StorageClasses[1].VolumeBindingMode; m == nil || *m != wffc {
		t.Errorf("gp3 binding mode lost: %v", m)
	}

	// Through the codec, the volume fields survive under their JSON names.
	enc, err := events.EncodeSnapshot(snap)
	if err != nil {
		t.Fatal(err)
	}
	dec, err := events.DecodeSnapshot(enc)
	if err != nil {
		t.Fatal(err)
	}
	if len(dec.PVCs) != 3 || len(dec.PVs) != 3 || len(dec.StorageClasses) != 2 || dec.PVCs[2].Spec.VolumeName != "pv-db" {
		t.Errorf("decoded volumes: %d PVCs %d PVs %d classes", len(dec.PVCs), len(dec.PVs), len(dec.StorageClasses))
	}

	// A change to a claim bumps the revision and is tracked under its kind.
	c := pvc("default", "data-0", "pv-prebound")
	if _, err := f.kube.CoreV1().PersistentVolumeClaims("default").Update(f.ctx, c, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "claim update event", func() bool { return f.watcher.ChangedSince(KindPVC, "default/data-0", snap.Revision) })
}

// The snapshot carries the VolumeAttachments of nodes that are leaving (being deleted, or
// tainted karpenter.sh/disrupted), and no other node's.
func TestSnapshotVolumeAttachmentsOfLeavingNodes(t *testing.T) {
	tainted, deleting, staying := node("n1"), node("n2"), node("n3")
	tainted.Spec.Taints = []corev1.Taint{{Key: "karpenter.sh/disrupted", Effect: corev1.TaintEffectNoSchedule}}
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	deleting.Finalizers = []string{events.FinalizerTermination}
	va := func(name, node string) *storagev1.VolumeAttachment {
		pvName := "pv-" + name
		return &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: storagev1.VolumeAttachmentSpec{
			Attacher: "ebs.csi.aws.com", NodeName: node, Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: &pvName}}}
	}
	f := newFixture(t, []runtime.Object{tainted, deleting, staying, va("a", "n1"), va("b", "n2"), va("c", "n3")})
	base := f.watcher.Revisions().Base()
	eventually(t, "6 initial add events", func() bool { return f.watcher.Revision() == base+6 })
	snap, err := f.builder.Build()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, v := range snap.VolumeAttachments {
		got = append(got, v.Name+"@"+v.Spec.NodeName)
	}
	if strings.Join(got, ",") != "a@n1,b@n2" {
		t.Fatalf("attachments %v", got)
	}
}
