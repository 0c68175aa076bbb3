package events

import (
	"fmt"
	"math/rand/v2"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// snapshotTime has whole seconds: metav1.Time is serialized with second precision (RFC 3339).
var snapshotTime = metav1.NewTime(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))

// testSnapshot builds a snapshot shaped like a real cluster: nodes with well-known labels,
// capacity and allocatable, and pods owned by ReplicaSets with requests, limits, tolerations and
// random-looking UIDs and name suffixes (from a seeded PRNG, so compression is not flattered by
// identical strings).
func testSnapshot(nodes, podsPerNode, pending int) *Snapshot {
	rng := rand.New(rand.NewPCG(1, 2))
	uid := func() types.UID {
		return types.UID(fmt.Sprintf("%08x-%04x-%04x-%04x-%012x", rng.Uint32(), rng.Uint32()&0xffff,
			rng.Uint32()&0xffff, rng.Uint32()&0xffff, rng.Uint64()&0xffffffffffff))
	}
	suffix := func() string {
		const alphabet = "bcdfghjklmnpqrstvwxz2456789"
		b := make([]byte, 5)
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return string(b)
	}
	zones := []string{"us-east-1a", "us-east-1b", "us-east-1c"}
	types_ := []string{"m5.2xlarge", "c6i.4xlarge", "r6g.xlarge", "m7i.large"}
	s := &Snapshot{SchemaVersion: SnapshotSchemaVersion, Cluster: "prod", Revision: 42, Time: snapshotTime}
	pod := func(i int) corev1.Pod {
		app := fmt.Sprintf("app-%d", i%50)
		return corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name: app + "-" + suffix() + suffix(), Namespace: "team-" + fmt.Sprint(i%7), UID: uid(),
				Labels:          map[string]string{"app": app, "pod-template-hash": suffix()},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: app + "-" + suffix(), UID: uid()}},
			},
			Spec: corev1.PodSpec{
				Containers: []corev1.Container{{
					Name: "main", Image: "registry.example.com/" + app + ":v1." + fmt.Sprint(i%13),
					Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(fmt.Sprintf("%dm", 100+rng.IntN(900))), corev1.ResourceMemory: resource.MustParse(fmt.Sprintf("%dMi", 128+rng.IntN(2048)))},
						Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("4Gi")},
					},
				}},
				Tolerations: []corev1.Toleration{{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}},
			},
			Status: corev1.PodStatus{Phase: corev1.PodRunning},
		}
	}
	for n := range nodes {
		name := fmt.Sprintf("ip-10-0-%d-%d.ec2.internal", n/250, n%250)
		s.Nodes = append(s.Nodes, corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, UID: uid(), Labels: map[string]string{
				"topology.kubernetes.io/zone":      zones[n%len(zones)],
				"node.kubernetes.io/instance-type": types_[n%len(types_)],
				"kubernetes.io/arch":               "amd64",
				apisv1.LabelCapacityType:           "spot",
				apisv1.LabelNodePool:               "default",
			}},
			Spec: corev1.NodeSpec{ProviderID: fmt.Sprintf("aws:///%s/i-%017x", zones[n%len(zones)], rng.Uint64())},
			Status: corev1.NodeStatus{
				Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32386572Ki"), corev1.ResourcePods: resource.MustParse("58")},
				Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("7910m"), corev1.ResourceMemory: resource.MustParse("31369740Ki"), corev1.ResourcePods: resource.MustParse("58")},
			},
		})
		for p := range podsPerNode {
			pd := pod(n*podsPerNode + p)
			pd.Spec.NodeName = name
			s.Pods = append(s.Pods, pd)
		}
	}
	for i := range pending {
		pd := pod(i)
		pd.Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}}
		s.PendingPods = append(s.PendingPods, pd)
	}
	s.DaemonSets = []appsv1.DaemonSet{{ObjectMeta: metav1.ObjectMeta{Name: "aws-node", Namespace: "kube-system"}}}
	s.NodePools = []apisv1.NodePool{{ObjectMeta: metav1.ObjectMeta{Name: "default"}}}
	s.UnavailableOfferings = []UnavailableOfferingMark{{OfferingKey: OfferingKey{InstanceType: "c6i.4xlarge", Zone: "us-east-1a", CapacityType: "spot"}, Reason: "InsufficientInstanceCapacity", Expires: snapshotTime}}
	return s
}
