package drain

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

var now = time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)

func mk(name string, opts ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Spec: corev1.PodSpec{NodeName: "n1"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &metav1.Time{Time: now.Add(-time.Hour)}}}
	for _, o := range opts {
		o(p)
	}
	return p
}

func daemon(p *corev1.Pod) {
	yes := true
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "ds", Controller: &yes}}
}
func critical(p *corev1.Pod) { p.Spec.PriorityClassName = PriorityClassNodeCritical }
func tolerant(p *corev1.Pod) {
	p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}} // tolerates every taint
}
func annotated(v string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Annotations = map[string]string{apisv1.AnnotationDoNotDisrupt: v} }
}
func deleted(ago time.Duration) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: now.Add(-ago)} }
}

func names(ps []*corev1.Pod) []string {
	out := []string{}
	for _, p := range ps {
		out = append(out, p.Name)
	}
	return out
}

func eq(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// The groups in Karpenter's order, each evicted only once the ones before it are empty; a pod
// tolerating the disrupted taint (here by a key-less Exists) is never waited for.
func TestNextFollowsKarpenterGroups(t *testing.T) {
	pods := []*corev1.Pod{mk("z-critical-ds", critical, daemon), mk("c-critical", critical), mk("b-ds", daemon),
		mk("a-web"), mk("y-web"), mk("tolerant", tolerant)}
	want := []struct {
		group Group
		evict []string
	}{
		{NonCriticalNonDaemon, []string{"a-web", "y-web"}},
		{NonCriticalDaemon, []string{"b-ds"}},
		{CriticalNonDaemon, []string{"c-critical"}},
		{CriticalDaemon, []string{"z-critical-ds"}},
	}
	for i, w := range want {
		s := Next(pods, now)
		if s.Drained() || s.Group != w.group || !eq(names(s.Evict), w.evict) {
			t.Fatalf("step %d: group %s evict %v", i, s.Group, names(s.Evict))
		}
		// The group's pods leave; the rest wait.
		var rest []*corev1.Pod
		for _, p := range pods {
			if GroupOf(p) != w.group || ToleratesDisrupted(p) {
				rest = append(rest, p)
			}
		}
		pods = rest
	}
	if s := Next(pods, now); !s.Drained() || !eq(names(pods), []string{"tolerant"}) {
		t.Fatalf("left: %v waiting %v", names(pods), names(s.Waiting))
	}
}

// A terminating pod holds its group (no later group is evicted) until it is gone or stuck a
// minute past its deletionTimestamp; a do-not-disrupt pod holds it too but is not evicted.
func TestNextWaitsForTerminatingAndProtectedPods(t *testing.T) {
	ds := mk("ds", daemon)
	s := Next([]*corev1.Pod{mk("web", deleted(30*time.Second)), ds}, now)
	if s.Group != NonCriticalNonDaemon || len(s.Evict) != 0 || len(s.Waiting) != 2 {
		t.Fatalf("terminating: group %s evict %v waiting %v", s.Group, names(s.Evict), names(s.Waiting))
	}
	// 61 s past its deletionTimestamp: stuck, no longer waited for.
	if s = Next([]*corev1.Pod{mk("web", deleted(61*time.Second)), ds}, now); s.Group != NonCriticalDaemon || !eq(names(s.Evict), []string{"ds"}) {
		t.Fatalf("stuck: group %s evict %v", s.Group, names(s.Evict))
	}
	s = Next([]*corev1.Pod{mk("web", annotated("true")), ds}, now)
	if len(s.Evict) != 0 || !eq(names(s.Protected), []string{"web"}) {
		t.Fatalf("protected: evict %v protected %v", names(s.Evict), names(s.Protected))
	}
	// "30m" on a pod started an hour ago has run out: evicted.
	if s = Next([]*corev1.Pod{mk("web", annotated("30m"))}, now); !eq(names(s.Evict), []string{"web"}) {
		t.Fatalf("expired protection: evict %v", names(s.Evict))
	}
	// Terminal, static and key-specific tolerating pods are never waited for.
	static := mk("kube-proxy", func(p *corev1.Pod) { p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "x"} })
	done := mk("job", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded })
	tol := mk("t", func(p *corev1.Pod) {
		p.Spec.Tolerations = []corev1.Toleration{{Key: apisv1.TaintKeyDisrupted, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	})
	if s = Next([]*corev1.Pod{static, done, tol}, now); !s.Drained() {
		t.Fatalf("waiting %v", names(s.Waiting))
	}
	// A toleration of another effect does not tolerate the NoSchedule taint.
	other := mk("o", func(p *corev1.Pod) {
		p.Spec.Tolerations = []corev1.Toleration{{Key: apisv1.TaintKeyDisrupted, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}}
	})
	if s = Next([]*corev1.Pod{other}, now); !eq(names(s.Evict), []string{"o"}) {
		t.Fatalf("NoExecute toleration: evict %v", names(s.Evict))
	}
}

// Attachments of the node block, except those without a PersistentVolume source, of other
// nodes, or of the volumes of pods the drain does not wait for.
func TestBlockingAttachments(t *testing.T) {
	pv := func(s string) *string { return &s }
	vas := []storagev1.VolumeAttachment{
		{ObjectMeta: metav1.ObjectMeta{Name: "b-web"}, Spec: storagev1.VolumeAttachmentSpec{NodeName: "n1", Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: pv("pv-web")}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "a-other-node"}, Spec: storagev1.VolumeAttachmentSpec{NodeName: "n2", Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: pv("pv-x")}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "c-inline"}, Spec: storagev1.VolumeAttachmentSpec{NodeName: "n1"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "d-tolerant"}, Spec: storagev1.VolumeAttachmentSpec{NodeName: "n1", Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: pv("pv-tol")}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "a-gone-pod"}, Spec: storagev1.VolumeAttachmentSpec{NodeName: "n1", Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: pv("pv-old")}}},
	}
	claim := func(c string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "d", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c}}}}
		}
	}
	pods := []*corev1.Pod{mk("web", claim("data-web")), mk("tol", tolerant, claim("data-tol"))}
	pvcs := map[string]string{"default/data-web": "pv-web", "default/data-tol": "pv-tol"}
	got := BlockingAttachments("n1", vas, pods, pvcs, now)
	var n []string
	for _, va := range got {
		n = append(n, va.Name)
	}
	// a-gone-pod's volume belongs to no pod on the node (its pod left): it blocks.
	if !eq(n, []string{"a-gone-pod", "b-web"}) {
		t.Fatalf("blocking %v", n)
	}
}
