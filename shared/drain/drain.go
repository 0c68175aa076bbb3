// Package drain holds the rules of Karpenter v1.14's node drain (kubernetes-sigs/karpenter
// pkg/controllers/node/termination drain.go and volumedetachment.go, pkg/utils/pod): which pods
// a terminating node waits for, which the Eviction API is asked to evict, in which priority
// groups, and which VolumeAttachments must be gone before the instance is terminated.
//
// Both sides use it: the lifecycle function decides from a snapshot whether a node is drained
// (and its NodeClaim's Drained and VolumesDetached conditions), and the agent evicts the pods of
// the first group that still has any. It is pure: the caller passes the clock.
package drain

import (
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/scheduling"
)

// DisruptedNoScheduleTaint is the taint a disrupting node carries (Karpenter's
// v1.DisruptedNoScheduleTaint: key karpenter.sh/disrupted, no value, NoSchedule). A pod that
// tolerates it would be scheduled straight back, so drain leaves it alone.
var DisruptedNoScheduleTaint = corev1.Taint{Key: apisv1.TaintKeyDisrupted, Effect: corev1.TaintEffectNoSchedule}

// StuckTerminatingAfter is how long past its deletionTimestamp a terminating pod is still
// waited for: one minute, Karpenter's IsStuckTerminating buffer (the deletionTimestamp already
// includes the pod's grace period; the minute lets the kubelet force-delete it).
const StuckTerminatingAfter = time.Minute

// Priority classes Karpenter treats as critical when ordering a drain (drain.go
// groupPodsByPriority): the two classes Kubernetes ships for the system.
const (
	PriorityClassClusterCritical = "system-cluster-critical"
	PriorityClassNodeCritical    = "system-node-critical"
)

// Group is a pod's place in the drain order. A node's pods leave group by group: every pod of a
// group is gone (or no longer waited for) before the next group is evicted.
type Group int

// The drain groups in eviction order, as Karpenter v1.14 returns them from groupPodsByPriority:
// non-critical pods first, DaemonSet pods after the workloads they serve at each criticality,
// and critical DaemonSet pods (CNI, CSI, log shippers) last.
const (
	NonCriticalNonDaemon Group = iota
	NonCriticalDaemon
	CriticalNonDaemon
	CriticalDaemon
	groups
)

// String names the group for logs and Events.
func (g Group) String() string {
	switch g {
	case NonCriticalNonDaemon:
		return "non-critical"
	case NonCriticalDaemon:
		return "non-critical DaemonSet"
	case CriticalNonDaemon:
		return "critical"
	case CriticalDaemon:
		return "critical DaemonSet"
	}
	return "unknown"
}

// GroupOf is the drain group of p: critical when its priorityClassName is
// system-cluster-critical or system-node-critical, DaemonSet when a DaemonSet controls it.
func GroupOf(p *corev1.Pod) Group {
	critical := p.Spec.PriorityClassName == PriorityClassClusterCritical || p.Spec.PriorityClassName == PriorityClassNodeCritical
	ds := scheduling.IsDaemonSetPod(p)
	switch {
	case critical && ds:
		return CriticalDaemon
	case critical:
		return CriticalNonDaemon
	case ds:
		return NonCriticalDaemon
	}
	return NonCriticalNonDaemon
}

// ToleratesDisrupted reports whether p tolerates karpenter.sh/disrupted:NoSchedule (an
// explicit toleration, or an operator Exists toleration without key that tolerates every taint).
func ToleratesDisrupted(p *corev1.Pod) bool {
	return scheduling.UntoleratedTaint(p.Spec.Tolerations, []corev1.Taint{DisruptedNoScheduleTaint}) == nil
}

// IsStatic reports whether p is a static pod's mirror (the kubelet owns it: the API server
// cannot delete or evict it): it carries the mirror annotation or a Node owns it.
func IsStatic(p *corev1.Pod) bool {
	if _, ok := p.Annotations[corev1.MirrorPodAnnotationKey]; ok {
		return true
	}
	for _, o := range p.OwnerReferences {
		if o.Kind == "Node" && o.APIVersion == "v1" {
			return true
		}
	}
	return false
}

// StuckTerminating reports whether p has been terminating for longer than
// StuckTerminatingAfter past its deletionTimestamp at now.
func StuckTerminating(p *corev1.Pod, now time.Time) bool {
	return p.DeletionTimestamp != nil && now.Sub(p.DeletionTimestamp.Time) > StuckTerminatingAfter
}

// Drainable reports whether the drain of p's node waits for p (Karpenter's IsDrainable): it
// does not tolerate the disrupted taint, is not a static pod, and is not stuck terminating.
// Pods protected by karpenter.sh/do-not-disrupt are drainable: the drain waits for them (until
// the terminationGracePeriod), it just does not evict them.
func Drainable(p *corev1.Pod, now time.Time) bool {
	return !ToleratesDisrupted(p) && !IsStatic(p) && !StuckTerminating(p, now)
}

// Waiting reports whether p still has to leave before its node counts as drained
// (Karpenter's IsWaitingEviction): not terminal, and drainable.
func Waiting(p *corev1.Pod, now time.Time) bool {
	return !scheduling.IsTerminal(p) && Drainable(p, now)
}

// Evictable reports whether the Eviction API may be asked to evict p now (Karpenter's
// IsEvictable): active (not terminal, not terminating), not tolerating the disrupted taint, not
// static, and not protected by karpenter.sh/do-not-disrupt at now.
func Evictable(p *corev1.Pod, now time.Time) bool {
	return !scheduling.IsTerminal(p) && p.DeletionTimestamp == nil && !ToleratesDisrupted(p) && !IsStatic(p) &&
		!apisv1.PodDoNotDisrupt(p, now)
}

// Step is where a node's drain stands.
type Step struct {
	// Waiting are all the pods the drain still waits for, in every group.
	Waiting []*corev1.Pod
	// Group is the first group that still has waiting pods; meaningful when Waiting is not empty.
	Group Group
	// Evict are the pods of Group the Eviction API may be asked to evict now (Evictable), in
	// namespace/name order. Pods of later groups are never in it.
	Evict []*corev1.Pod
	// Protected are the pods of Group that wait but may not be evicted: do-not-disrupt pods
	// (they go when they finish, or at the terminationGracePeriod).
	Protected []*corev1.Pod
}

// Drained reports whether no pod is waited for.
func (s Step) Drained() bool { return len(s.Waiting) == 0 }

// Next is the drain step of a node's pods at now: the pods still waited for, and of the first
// group that has any, the ones to evict. Karpenter's drain evicts only that group and retries
// (drain.go: the first non-empty group goes to the eviction queue, the rest wait).
func Next(pods []*corev1.Pod, now time.Time) Step {
	var (
		s   Step
		per [groups][]*corev1.Pod
	)
	for _, p := range pods {
		if Waiting(p, now) {
			s.Waiting = append(s.Waiting, p)
			g := GroupOf(p)
			per[g] = append(per[g], p)
		}
	}
	for g := range per {
		if len(per[g]) == 0 {
			continue
		}
		s.Group = Group(g)
		group := append([]*corev1.Pod(nil), per[g]...)
		sort.Slice(group, func(i, j int) bool {
			if group[i].Namespace != group[j].Namespace {
				return group[i].Namespace < group[j].Namespace
			}
			return group[i].Name < group[j].Name
		})
		for _, p := range group {
			switch {
			case Evictable(p, now):
				s.Evict = append(s.Evict, p)
			case p.DeletionTimestamp == nil:
				s.Protected = append(s.Protected, p)
			}
		}
		break
	}
	return s
}

// BlockingAttachments are the VolumeAttachments of node that must be gone before its instance
// is terminated (Karpenter's blockingVolumeAttachments): those whose spec.nodeName is node and
// whose source is a PersistentVolume, except the volumes of pods the drain does not wait for
// (not Drainable: their volumes stay attached until someone deletes them, so waiting would only
// run out the grace period). pvcs maps "namespace/claim" to the PersistentVolume name it is bound
// to (spec.volumeName). The result is sorted by name.
func BlockingAttachments(node string, vas []storagev1.VolumeAttachment, pods []*corev1.Pod, pvcs map[string]string, now time.Time) []*storagev1.VolumeAttachment {
	kept := map[string]bool{}
	for _, p := range pods {
		if Drainable(p, now) {
			continue
		}
		for _, v := range p.Spec.Volumes {
			if v.PersistentVolumeClaim == nil {
				continue
			}
			if pv := pvcs[p.Namespace+"/"+v.PersistentVolumeClaim.ClaimName]; pv != "" {
				kept[pv] = true
			}
		}
	}
	var out []*storagev1.VolumeAttachment
	for i := range vas {
		va := &vas[i]
		pv := va.Spec.Source.PersistentVolumeName
		if va.Spec.NodeName != node || pv == nil || kept[*pv] {
			continue
		}
		out = append(out, va)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
