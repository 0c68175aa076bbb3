package planner

import (
	"strings"
	"testing"
	"time"

	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	"github.com/dovetail-dev/dovetail/shared/manifests"
)

const docs = `
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: gp3, annotations: {storageclass.kubernetes.io/is-default-class: "true"}}
provisioner: ebs.csi.aws.com
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  replicas: 2
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec: {containers: [{name: db, image: x}]}
  volumeClaimTemplates:
    - metadata: {name: data}
      spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
---
apiVersion: v1
kind: Node
metadata: {name: node-a}
---
apiVersion: v1
kind: Pod
metadata: {name: running}
spec: {nodeName: node-a, containers: [{name: c, image: x}]}
`

func TestInput(t *testing.T) {
	set, err := manifests.LoadReader("in.yaml", strings.NewReader(docs))
	if err != nil {
		t.Fatal(err)
	}
	in, err := Input(set, catalog.MustAWS(), cloud.NodeSettingsFor)
	if err != nil {
		t.Fatal(err)
	}
	// Two StatefulSet replicas pending, the bound Pod running on node-a, one claim per replica
	// named <template>-<statefulset>-<ordinal> with the default class, the class itself.
	if len(in.Pods) != 2 || in.Pods[0].Name != "db-0" || len(in.BoundPods) != 1 || in.BoundPods[0].Name != "running" {
		t.Fatalf("pods %d bound %d", len(in.Pods), len(in.BoundPods))
	}
	if len(in.PVCs) != 2 || in.PVCs[1].Name != "data-db-1" || *in.PVCs[1].Spec.StorageClassName != "gp3" {
		t.Fatalf("claims: %+v", in.PVCs)
	}
	if len(in.StorageClasses) != 1 || len(in.Nodes) != 1 || in.Catalog == nil {
		t.Fatalf("classes %d nodes %d", len(in.StorageClasses), len(in.Nodes))
	}
	if v := in.Pods[1].Spec.Volumes; len(v) != 1 || v[0].PersistentVolumeClaim.ClaimName != "data-db-1" {
		t.Fatalf("db-1 volumes: %+v", v)
	}
}

// A pod bound to a node the input does not hold is what PodGC deletes: the ReplicaSet's pod is
// recreated unbound, so it is planned as pending (one NodeClaim holds its 500m); the bare pod
// is gone for good and left out. One warning line names both.
func TestInputPodOnMissingNode(t *testing.T) {
	const doc = `apiVersion: v1
kind: Pod
metadata:
  name: web-1
  ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: web, uid: rs, controller: true}]
spec: {nodeName: ghost, containers: [{name: c, image: x, resources: {requests: {cpu: 500m, memory: 256Mi}}}]}
---
apiVersion: v1
kind: Pod
metadata: {name: bare}
spec: {nodeName: ghost, containers: [{name: c, image: x, resources: {requests: {cpu: "2", memory: 1Gi}}}]}
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements: [{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}]
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  amiSelectorTerms: [{alias: al2023@latest}]
  role: node
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: c}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: c}}]
`
	set, err := manifests.LoadReader("in.yaml", strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	snap, err := Snapshot(set, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.PendingPods) != 1 || snap.PendingPods[0].Name != "web-1" || snap.PendingPods[0].Spec.NodeName != "" || len(snap.Pods) != 0 {
		t.Fatalf("pending %d, bound %d: want web-1 pending and unbound, bare left out", len(snap.PendingPods), len(snap.Pods))
	}
	plan, _, err := Plan(set, catalog.MustAWS(), cloud.NodeSettingsFor)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.NodeClaims) != 1 || len(plan.NodeClaims[0].Pods) != 1 || plan.NodeClaims[0].Pods[0].Name != "web-1" {
		t.Errorf("plan %d NodeClaims, want one holding web-1", len(plan.NodeClaims))
	}
	want := "2 pod(s) bound to nodes not in the input (PodGC deletes them); planned as pending, their controllers recreate them: default/web-1 on ghost; left out, nothing recreates them: default/bare on ghost"
	if got := OrphanWarning(set); got != want {
		t.Errorf("warning\n%s\nwant\n%s", got, want)
	}
	if set.Pods[0].Spec.NodeName != "ghost" {
		t.Error("Snapshot changed the Set's pod")
	}
}
