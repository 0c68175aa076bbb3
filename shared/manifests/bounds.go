package manifests

import (
	"errors"
	"fmt"
	"reflect"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"

	"github.com/dovetail-dev/dovetail/events"
	apiv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/boundedjson"
)

// Bounds of one document, checked on its JSON before it is decoded: the objects it would decode
// into may take at most MaxObjectBytesPerByte times its bytes (real manifests take about 8,
// boundedjson's estimate; "containers: [{},{},...]" takes 270) and at least minDocumentBudget,
// with the per-message object counts of the wire contract (events.Caps: 300,000 containers...).
const (
	MaxObjectBytesPerByte = 16
	minDocumentBudget     = 64 << 20
)

// kindTypes are the Go types each kind decodes into (v1beta1 Karpenter kinds are bounded as
// their v1 shape, which they convert to).
var kindTypes = map[string]reflect.Type{
	"Deployment":            reflect.TypeFor[appsv1.Deployment](),
	"StatefulSet":           reflect.TypeFor[appsv1.StatefulSet](),
	"ReplicaSet":            reflect.TypeFor[appsv1.ReplicaSet](),
	"DaemonSet":             reflect.TypeFor[appsv1.DaemonSet](),
	"Job":                   reflect.TypeFor[batchv1.Job](),
	"CronJob":               reflect.TypeFor[batchv1.CronJob](),
	"Pod":                   reflect.TypeFor[corev1.Pod](),
	"Node":                  reflect.TypeFor[corev1.Node](),
	"Namespace":             reflect.TypeFor[corev1.Namespace](),
	"PodDisruptionBudget":   reflect.TypeFor[policyv1.PodDisruptionBudget](),
	"PersistentVolumeClaim": reflect.TypeFor[corev1.PersistentVolumeClaim](),
	"PersistentVolume":      reflect.TypeFor[corev1.PersistentVolume](),
	"StorageClass":          reflect.TypeFor[storagev1.StorageClass](),
	"NodePool":              reflect.TypeFor[apiv1.NodePool](),
	"NodeClaim":             reflect.TypeFor[apiv1.NodeClaim](),
	apiv1.KindEC2NodeClass:  reflect.TypeFor[apiv1.EC2NodeClass](),
	apiv1.KindAKSNodeClass:  reflect.TypeFor[apiv1.AKSNodeClass](),
}

// checkBounds refuses a document whose decoded object would exceed the bounds, naming the field.
func checkBounds(src Source, h header, raw []byte) error {
	t, ok := kindTypes[h.Kind]
	if !ok {
		return nil
	}
	l := boundedjson.Limits{MaxBytes: max(int64(len(raw))*MaxObjectBytesPerByte, minDocumentBudget), Caps: events.Caps}
	if _, err := boundedjson.Check(raw, t, l); err != nil {
		if !errors.Is(err, boundedjson.ErrLimit) {
			return &Error{Source: src, Kind: h.Kind, Name: h.Metadata.Name, Reason: "not valid JSON: " + err.Error()}
		}
		return &Error{Source: src, Kind: h.Kind, Name: h.Metadata.Name, Reason: fmt.Sprintf("too large to decode: %v", err)}
	}
	return nil
}
