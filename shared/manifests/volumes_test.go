package manifests

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
)

// testdata/volumes.yaml: two StorageClasses (gp3 default, WaitForFirstConsumer; io2 Immediate),
// one PV, two PVC documents, a StatefulSet with two volumeClaimTemplates and ordinals from 3, and
// a Pod with a generic ephemeral volume. Expected names follow the StatefulSet controller's rule
// "<template>-<statefulset>-<ordinal>" and the ephemeral rule "<pod>-<volume>" (Kubernetes docs).
func TestLoadVolumes(t *testing.T) {
	s, err := Load("testdata/volumes.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.StorageClasses) != 2 || len(s.PVs) != 1 || len(s.PVCs) != 2 || len(s.Warnings) != 0 {
		t.Fatalf("got %d classes %d PVs %d PVCs, warnings %q; want 2, 1, 2, none", len(s.StorageClasses), len(s.PVs), len(s.PVCs), s.Warnings)
	}
	if m := s.StorageClasses[0].VolumeBindingMode; m == nil || *m != storagev1.VolumeBindingWaitForFirstConsumer {
		t.Errorf("gp3 volumeBindingMode = %v, want WaitForFirstConsumer", m)
	}
	if z := s.StorageClasses[0].AllowedTopologies[0].MatchLabelExpressions[0].Values; !reflect.DeepEqual(z, []string{"us-east-1a", "us-east-1b"}) {
		t.Errorf("gp3 allowedTopologies = %v", z)
	}
	if pv := s.PVs[0]; pv.Namespace != "" || pv.Spec.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions[0].Values[0] != "us-east-1c" {
		t.Errorf("PV: namespace %q (want none), node affinity %+v", pv.Namespace, pv.Spec.NodeAffinity)
	}
	if s.PVCs[0].Namespace != DefaultNamespace || s.PVCs[1].Namespace != "shop" {
		t.Errorf("PVC namespaces: %q %q", s.PVCs[0].Namespace, s.PVCs[1].Namespace)
	}
	if d := s.DefaultStorageClass(); d == nil || d.Name != "gp3" {
		t.Errorf("default class = %v, want gp3", d)
	}

	// Pods: db-3 and db-4 (ordinals from 3), then eph. The template's emptyDir "data" is replaced
	// by the claim; "tmp" stays.
	pods := s.ExpandPods()
	var names []string
	for _, p := range pods {
		names = append(names, p.Name)
	}
	if want := []string{"db-3", "db-4", "eph"}; !reflect.DeepEqual(names, want) {
		t.Fatalf("pods = %v, want %v", names, want)
	}
	vols := map[string]string{}
	for _, v := range pods[1].Spec.Volumes {
		switch {
		case v.PersistentVolumeClaim != nil:
			vols[v.Name] = "pvc:" + v.PersistentVolumeClaim.ClaimName
		case v.EmptyDir != nil:
			vols[v.Name] = "emptyDir"
		}
	}
	if want := map[string]string{"data": "pvc:data-db-4", "tmp": "emptyDir", "logs": "pvc:logs-db-4"}; !reflect.DeepEqual(vols, want) {
		t.Errorf("db-4 volumes = %v, want %v", vols, want)
	}
	if len(s.Workloads[0].Template.Spec.Volumes) != 2 || s.Workloads[0].Template.Spec.Volumes[0].EmptyDir == nil {
		t.Errorf("expanding changed the StatefulSet's template")
	}

	// Claims: the two documents, then data/logs for ordinal 3 and logs for ordinal 4 (data-db-4
	// is a document already), then the ephemeral claim.
	type claim struct{ ns, name, class, phase, volume string }
	var got []claim
	byName := map[string]*corev1.PersistentVolumeClaim{}
	for _, c := range s.ExpandPVCs() {
		class := "<nil>"
		if c.Spec.StorageClassName != nil {
			class = *c.Spec.StorageClassName
		}
		got = append(got, claim{c.Namespace, c.Name, class, string(c.Status.Phase), c.Spec.VolumeName})
		byName[c.Name] = c
	}
	want := []claim{
		{"default", "data-db-4", "io2", "Bound", "pv-a"}, // volumeName set: Bound
		{"shop", "static", "", "Pending", ""},            // "" is no class: not defaulted
		{"default", "data-db-3", "gp3", "Pending", ""},   // template without a class: the default
		{"default", "logs-db-3", "io2", "Pending", ""},
		{"default", "logs-db-4", "io2", "Pending", ""},
		{"default", "eph-cache", "gp3", "Pending", ""},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("claims:\n got %+v\nwant %+v", got, want)
	}
	if l := byName["data-db-3"].Labels; !reflect.DeepEqual(l, map[string]string{"tier": "storage", "app": "db"}) {
		t.Errorf("data-db-3 labels = %v, want the template's and the selector's", l)
	}
	if q := byName["data-db-3"].Spec.Resources.Requests[corev1.ResourceStorage]; q.String() != "10Gi" {
		t.Errorf("data-db-3 storage = %s", q.String())
	}
	if o := byName["eph-cache"].OwnerReferences; len(o) != 1 || o[0].Kind != "Pod" || o[0].Name != "eph" {
		t.Errorf("eph-cache owner = %+v, want the pod", o)
	}
	// Copies: changing a claim changes neither the Set nor the next expansion.
	*byName["data-db-4"].Spec.StorageClassName = "changed"
	if c := s.ExpandPVCs()[0]; *c.Spec.StorageClassName != "io2" || *s.PVCs[0].Spec.StorageClassName != "io2" {
		t.Errorf("ExpandPVCs shares memory with the Set")
	}
}

func TestVolumeErrors(t *testing.T) {
	cases := []struct{ name, doc, want string }{
		{"class without provisioner", "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {name: x}\n",
			"StorageClass x: provisioner: required"},
		{"bad binding mode", "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {name: x}\nprovisioner: p\nvolumeBindingMode: Later\n",
			`StorageClass x: volumeBindingMode: "Later" is not Immediate or WaitForFirstConsumer`},
		{"old class version", "apiVersion: storage.k8s.io/v1beta1\nkind: StorageClass\nmetadata: {name: x}\nprovisioner: p\n",
			"apiVersion: storage.k8s.io/v1beta1 is not supported for StorageClass; use storage.k8s.io/v1"},
		{"PVC unknown field", "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: c}\nspec: {storageClass: gp3}\n",
			`unknown field "spec.storageClass"`},
		{"PVC bad quantity", "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: c}\nspec: {resources: {requests: {storage: big}}}\n",
			`spec.resources.requests.storage: "big" is not a quantity`},
		{"duplicate PV", "apiVersion: v1\nkind: PersistentVolume\nmetadata: {name: v}\n---\napiVersion: v1\nkind: PersistentVolume\nmetadata: {name: v}\n",
			"duplicate: PersistentVolume v is already defined at bad.yaml doc 0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := LoadReader("bad.yaml", strings.NewReader(c.doc))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want it to contain %q", err, c.want)
			}
		})
	}
}
