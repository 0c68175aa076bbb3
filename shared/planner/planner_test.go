package planner

import (
	"strings"
	"testing"

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

func TestInputUnknownNode(t *testing.T) {
	set, err := manifests.LoadReader("in.yaml", strings.NewReader("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {nodeName: ghost, containers: [{name: c, image: x}]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := Plan(set, catalog.MustAWS(), cloud.NodeSettingsFor); err == nil || !strings.Contains(err.Error(), `pod default/p: spec.nodeName: node "ghost" is not in the manifests`) {
		t.Fatalf("error = %v", err)
	}
}
