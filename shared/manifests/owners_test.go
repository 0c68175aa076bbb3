package manifests

import (
	"sort"
	"strings"
	"testing"
)

// A dump of a live cluster lists the controllers and the pods they run: each controller adds
// only the pods it lacks. Expected pods, by hand from the documents below:
//   - Deployment web (3 replicas) runs web-7c9f-a and web-7c9f-b through ReplicaSet web-7c9f
//     (in the dump, owned by web), and web-7c9f-c is being deleted: one pod to add, web-0; the
//     ReplicaSet adds none of its own;
//   - Deployment api (2 replicas) runs api-66b-x through ReplicaSet api-66b, which is not in the
//     dump (found from its name and the pod-template-hash label): one pod to add, api-0;
//   - StatefulSet db (3 replicas) runs db-0 (its UID agrees): adds db-1 and db-2;
//   - Deployment old (1 replica, uid u-old-2) and a pod of a ReplicaSet whose Deployment had
//     uid u-old-1: another object, so old still adds old-0;
//   - CronJob nightly runs nightly-28000000-q through Job nightly-28000000 (not in the dump): no
//     pod to add (parallelism 1); a finished pod of an older run does not count;
//   - the five Pods themselves stay as they are.
func TestControllersAddOnlyMissingPods(t *testing.T) {
	s, err := LoadReader("dump.yaml", strings.NewReader(liveDump))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range s.ExpandPods() {
		got = append(got, p.Name)
	}
	sort.Strings(got)
	want := []string{"api-0", "api-66b-x", "db-0", "db-1", "db-2", "nightly-27999000-old", "nightly-28000000-q", "old-0", "old-5f-z",
		"web-0", "web-7c9f-a", "web-7c9f-b", "web-7c9f-c"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("pods:\n got %v\nwant %v", got, want)
	}
}

const liveDump = `apiVersion: v1
kind: List
metadata: {resourceVersion: ""}
items:
- apiVersion: apps/v1
  kind: Deployment
  metadata: {name: web, namespace: shop, uid: u-web}
  spec:
    replicas: 3
    selector: {matchLabels: {app: web}}
    template:
      metadata: {labels: {app: web}}
      spec: {containers: [{name: c, image: nginx}]}
- apiVersion: apps/v1
  kind: ReplicaSet
  metadata:
    name: web-7c9f
    namespace: shop
    uid: u-web-rs
    ownerReferences: [{apiVersion: apps/v1, kind: Deployment, name: web, uid: u-web, controller: true}]
  spec:
    replicas: 3
    selector: {matchLabels: {app: web, pod-template-hash: 7c9f}}
    template:
      metadata: {labels: {app: web, pod-template-hash: 7c9f}}
      spec: {containers: [{name: c, image: nginx}]}
- apiVersion: v1
  kind: Pod
  metadata:
    name: web-7c9f-a
    namespace: shop
    labels: {app: web, pod-template-hash: 7c9f}
    ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: web-7c9f, uid: u-web-rs, controller: true}]
  spec: {nodeName: n1, containers: [{name: c, image: nginx}]}
  status: {phase: Running}
- apiVersion: v1
  kind: Pod
  metadata:
    name: web-7c9f-b
    namespace: shop
    labels: {app: web, pod-template-hash: 7c9f}
    ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: web-7c9f, uid: u-web-rs, controller: true}]
  spec: {containers: [{name: c, image: nginx}]}
  status: {phase: Pending}
- apiVersion: v1
  kind: Pod
  metadata:
    name: web-7c9f-c
    namespace: shop
    deletionTimestamp: "2025-01-01T00:00:00Z"
    labels: {app: web, pod-template-hash: 7c9f}
    ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: web-7c9f, uid: u-web-rs, controller: true}]
  spec: {nodeName: n1, containers: [{name: c, image: nginx}]}
  status: {phase: Running}
- apiVersion: apps/v1
  kind: Deployment
  metadata: {name: api, namespace: shop}
  spec:
    replicas: 2
    selector: {matchLabels: {app: api}}
    template:
      metadata: {labels: {app: api}}
      spec: {containers: [{name: c, image: api}]}
- apiVersion: v1
  kind: Pod
  metadata:
    name: api-66b-x
    namespace: shop
    labels: {app: api, pod-template-hash: 66b}
    ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: api-66b, uid: u-api-rs, controller: true}]
  spec: {nodeName: n1, containers: [{name: c, image: api}]}
  status: {phase: Running}
- apiVersion: apps/v1
  kind: StatefulSet
  metadata: {name: db, namespace: shop, uid: u-db}
  spec:
    replicas: 3
    serviceName: db
    selector: {matchLabels: {app: db}}
    template:
      metadata: {labels: {app: db}}
      spec: {containers: [{name: c, image: pg}]}
- apiVersion: v1
  kind: Pod
  metadata:
    name: db-0
    namespace: shop
    labels: {app: db}
    ownerReferences: [{apiVersion: apps/v1, kind: StatefulSet, name: db, uid: u-db, controller: true}]
  spec: {nodeName: n1, containers: [{name: c, image: pg}]}
  status: {phase: Running}
- apiVersion: apps/v1
  kind: Deployment
  metadata: {name: old, namespace: shop, uid: u-old-2}
  spec:
    replicas: 1
    selector: {matchLabels: {app: old}}
    template:
      metadata: {labels: {app: old}}
      spec: {containers: [{name: c, image: old}]}
- apiVersion: apps/v1
  kind: ReplicaSet
  metadata:
    name: old-5f
    namespace: shop
    uid: u-old-rs
    ownerReferences: [{apiVersion: apps/v1, kind: Deployment, name: old, uid: u-old-1, controller: true}]
  spec:
    replicas: 0
    selector: {matchLabels: {app: old, pod-template-hash: 5f}}
    template:
      metadata: {labels: {app: old, pod-template-hash: 5f}}
      spec: {containers: [{name: c, image: old}]}
- apiVersion: v1
  kind: Pod
  metadata:
    name: old-5f-z
    namespace: shop
    labels: {app: old, pod-template-hash: 5f}
    ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: old-5f, uid: u-old-rs, controller: true}]
  spec: {nodeName: n1, containers: [{name: c, image: old}]}
  status: {phase: Running}
- apiVersion: batch/v1
  kind: CronJob
  metadata: {name: nightly, namespace: shop}
  spec:
    schedule: "0 3 * * *"
    jobTemplate:
      spec:
        template:
          spec: {restartPolicy: Never, containers: [{name: c, image: backup}]}
- apiVersion: v1
  kind: Pod
  metadata:
    name: nightly-28000000-q
    namespace: shop
    ownerReferences: [{apiVersion: batch/v1, kind: Job, name: nightly-28000000, uid: u-job, controller: true}]
  spec: {nodeName: n1, restartPolicy: Never, containers: [{name: c, image: backup}]}
  status: {phase: Running}
- apiVersion: v1
  kind: Pod
  metadata:
    name: nightly-27999000-old
    namespace: shop
    ownerReferences: [{apiVersion: batch/v1, kind: Job, name: nightly-27999000, uid: u-job-0, controller: true}]
  spec: {nodeName: n1, restartPolicy: Never, containers: [{name: c, image: backup}]}
  status: {phase: Succeeded}
`

// "-" reads standard input, once; its documents are located as <stdin>.
func TestLoadFromStdin(t *testing.T) {
	s, err := LoadFrom(strings.NewReader(liveDump), Stdin)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Workloads) != 7 || len(s.Pods) != 8 { // counted in liveDump
		t.Errorf("%d workloads, %d pods; want 7 and 8", len(s.Workloads), len(s.Pods))
	}
	if _, err := LoadFrom(strings.NewReader(""), Stdin, Stdin); err == nil || !strings.Contains(err.Error(), "given twice") {
		t.Errorf("stdin twice: %v", err)
	}
	_, err = LoadFrom(strings.NewReader("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: []}\n"), Stdin)
	if err == nil || !strings.HasPrefix(err.Error(), "<stdin> doc 0: Pod p: spec.containers") {
		t.Errorf("error %v, want it located at <stdin> doc 0", err)
	}
}

// Owner references that form a cycle (Deployment a owned by ReplicaSet b, b owned by a; and a
// ReplicaSet owning itself) made every workload in it look owned, so none added a pod and they
// vanished from the plan. Each now adds its own replicas and OwnerCycles names them; the
// well-formed pair beside them is unchanged (the ReplicaSet adds nothing, its Deployment 2).
func TestOwnerCyclesAreNamedAndPlanned(t *testing.T) {
	s, err := LoadReader("cycle.yaml", strings.NewReader(cycleDump))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range s.ExpandPods() {
		got = append(got, p.Name)
	}
	sort.Strings(got)
	want := "a-0 b-0 b-1 ok-0 ok-1 self-0"
	if strings.Join(got, " ") != want {
		t.Errorf("pods %v, want %s", got, want)
	}
	if c := strings.Join(s.OwnerCycles(), "; "); c != "Deployment default/a; ReplicaSet default/b; ReplicaSet default/self" {
		t.Errorf("cycles %q", c)
	}
}

const cycleDump = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: a
  ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: b, controller: true}]
spec:
  replicas: 1
  selector: {matchLabels: {app: a}}
  template: {metadata: {labels: {app: a}}, spec: {containers: [{name: c, image: x}]}}
---
apiVersion: apps/v1
kind: ReplicaSet
metadata:
  name: b
  ownerReferences: [{apiVersion: apps/v1, kind: Deployment, name: a, controller: true}]
spec:
  replicas: 2
  selector: {matchLabels: {app: b}}
  template: {metadata: {labels: {app: b}}, spec: {containers: [{name: c, image: x}]}}
---
apiVersion: apps/v1
kind: ReplicaSet
metadata:
  name: self
  ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: self, controller: true}]
spec:
  replicas: 1
  selector: {matchLabels: {app: self}}
  template: {metadata: {labels: {app: self}}, spec: {containers: [{name: c, image: x}]}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: ok}
spec:
  replicas: 2
  selector: {matchLabels: {app: ok}}
  template: {metadata: {labels: {app: ok}}, spec: {containers: [{name: c, image: x}]}}
---
apiVersion: apps/v1
kind: ReplicaSet
metadata:
  name: ok-5f
  ownerReferences: [{apiVersion: apps/v1, kind: Deployment, name: ok, controller: true}]
spec:
  replicas: 2
  selector: {matchLabels: {app: ok}}
  template: {metadata: {labels: {app: ok}}, spec: {containers: [{name: c, image: x}]}}
`
