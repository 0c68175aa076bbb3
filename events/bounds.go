package events

import (
	"reflect"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/boundedjson"
)

// Object counts one message may carry, checked on the JSON before anything is decoded. They are
// sized for the largest cluster Dovetail supports, which is the largest Kubernetes itself
// supports (Kubernetes documentation, "Considerations for large clusters": no more than 5,000
// nodes, 150,000 total pods, 300,000 total containers, 110 pods per node).
const (
	MaxNodes = 5000
	// MaxPods bounds pods and pendingPods together.
	MaxPods = 150000
	// MaxContainers bounds containers and init containers of every pod together (ephemeral
	// containers are bounded alike).
	MaxContainers = 300000
	// MaxNodeClaims allows a NodeClaim per node plus as many launching or terminating.
	MaxNodeClaims = 2 * MaxNodes
	// MaxPDBs, MaxPVCs and MaxPVs allow one per pod.
	MaxPDBs = MaxPods
	MaxPVCs = MaxPods
	MaxPVs  = MaxPods
	// MaxUnavailableOfferings exceeds every offering of the AWS catalog (1,377 instance types ×
	// at most 6 zones × 3 capacity types = 24,786).
	MaxUnavailableOfferings = 30000
	// MaxSmallKinds bounds DaemonSets, NodePools, NodeClasses, NodeOverlays, StorageClasses,
	// ProvisioningRequests and PodTemplates: Dovetail's own
	// bound, far above the few dozen a large cluster runs.
	MaxSmallKinds = 10000
)

// Bounds of a payload's size, relative to its compressed size, so memory follows the input.
// Measured (TestRealSnapshotsFitTheBounds): snapshots compress 7.3:1 (30,000 varied pods) to
// 22:1 (15,000 pods of one Deployment, the most repetitive real shape); boundedjson estimates
// their decoded objects at 6.0 times their JSON, so 44 to 134 bytes per compressed byte.
const (
	// MaxExpansion bounds the decompressed JSON at 32 times the compressed payload (plus
	// MinDecodedBudget for tiny payloads): above every real snapshot, and a 735-byte frame can
	// no longer expand to 6 MB of "{}," elements.
	MaxExpansion = 32
	// MaxObjectBytesPerInputByte bounds the estimated decoded objects at 160 bytes per
	// compressed byte (real snapshots need 44 to 134). With MaxExpansion it keeps the peak
	// memory of decoding any input of 1 MiB under 256 MiB (TestHostileInputsPeakMemory).
	MaxObjectBytesPerInputByte = 160
	// MinDecodedBudget is the floor of both bounds (16 MiB of JSON, 96 MiB of objects): a
	// snapshot of a few hundred nodes is never refused however well it compresses (identical pods
	// with sequential names compress far better than the 22:1 of real ones), and a hostile small
	// input still peaks well under 256 MiB (TestHostileInputsPeakMemory).
	MinDecodedBudget = 16 << 20
	minObjectBudget  = 96 << 20
)

// Caps are the per-message object counts, by element type, for boundedjson.
var Caps = map[reflect.Type]boundedjson.Cap{
	reflect.TypeFor[corev1.Node]():                  {Name: "nodes", Max: MaxNodes},
	reflect.TypeFor[corev1.Pod]():                   {Name: "pods (pods and pendingPods)", Max: MaxPods},
	reflect.TypeFor[corev1.Container]():             {Name: "containers (containers and initContainers of all pods)", Max: MaxContainers},
	reflect.TypeFor[corev1.EphemeralContainer]():    {Name: "ephemeral containers", Max: MaxContainers},
	reflect.TypeFor[apisv1.NodeClaim]():             {Name: "nodeClaims", Max: MaxNodeClaims},
	reflect.TypeFor[policyv1.PodDisruptionBudget](): {Name: "pdbs", Max: MaxPDBs},
	reflect.TypeFor[corev1.PersistentVolumeClaim](): {Name: "pvcs", Max: MaxPVCs},
	reflect.TypeFor[corev1.PersistentVolume]():      {Name: "pvs", Max: MaxPVs},
	reflect.TypeFor[storagev1.VolumeAttachment]():   {Name: "volumeAttachments", Max: MaxPVs},
	reflect.TypeFor[UnavailableOfferingMark]():      {Name: "unavailable offerings", Max: MaxUnavailableOfferings},
	reflect.TypeFor[appsv1.DaemonSet]():             {Name: "daemonSets", Max: MaxSmallKinds},
	reflect.TypeFor[apisv1.NodePool]():              {Name: "nodePools", Max: MaxSmallKinds},
	reflect.TypeFor[apisv1.NodeClass]():             {Name: "nodeClasses", Max: MaxSmallKinds},
	reflect.TypeFor[storagev1.StorageClass]():       {Name: "storageClasses", Max: MaxSmallKinds},
	reflect.TypeFor[apisv1.NodeOverlay]():           {Name: "nodeOverlays", Max: MaxSmallKinds},
	reflect.TypeFor[apisv1.ProvisioningRequest]():   {Name: "provisioningRequests", Max: MaxSmallKinds},
	reflect.TypeFor[corev1.PodTemplate]():           {Name: "podTemplates", Max: MaxSmallKinds},
	reflect.TypeFor[PodRef]():                       {Name: "command pods", Max: MaxPods},
	reflect.TypeFor[EventRecord]():                  {Name: "command events", Max: MaxPods},
}

// maxDecoded is the decompressed-size bound of a payload of n compressed bytes.
func maxDecoded(n int) int64 {
	return min(max(int64(n)*MaxExpansion, MinDecodedBudget), MaxDecodedPayloadBytes)
}

// Limits are the boundedjson limits of a payload that was n bytes as received (compressed).
func Limits(n int) boundedjson.Limits {
	return boundedjson.Limits{MaxBytes: max(int64(n)*MaxObjectBytesPerInputByte, minObjectBudget), Caps: Caps}
}
