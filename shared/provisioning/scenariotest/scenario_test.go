package scenariotest

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	"github.com/dovetail-dev/dovetail/shared/planner"
	"github.com/dovetail-dev/dovetail/shared/provisioning"
)

// scenarioDir is testdata/scenarios at the repository root.
var scenarioDir = filepath.Join("..", "..", "..", "testdata", "scenarios")

func loadAll(t *testing.T) []*Scenario {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(scenarioDir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no scenarios in %s", scenarioDir)
	}
	var out []*Scenario
	for _, f := range files {
		s, err := Load(f)
		if err != nil {
			t.Fatalf("loading scenario: %v", err)
		}
		out = append(out, s)
	}
	return out
}

// TestScenarios runs every testdata/scenarios/*.yaml and reports each failed expectation under
// the scenario's name (go test -run 'TestScenarios/<name>' runs one).
func TestScenarios(t *testing.T) {
	cat := catalog.MustAWS()
	for _, s := range loadAll(t) {
		t.Run(s.Name, func(t *testing.T) {
			_, fails, err := s.Run(cat, cloud.NodeSettingsFor)
			if err != nil {
				t.Fatalf("%s: %v", s.Name, err)
			}
			for _, f := range fails {
				t.Errorf("%s: %s", s.Name, f)
			}
			if len(fails) > 0 {
				t.Logf("%s: %s", s.Name, s.Description)
			}
		})
	}
}

// TestScenariosThroughSnapshot feeds every scenario's input through the agent's wire format
// (events.Snapshot, encoded and decoded by the codec) and provisioning.InputFromSnapshot, and
// checks the plan is the one the manifests give directly: the snapshot carries everything a
// decision needs, volumes included.
func TestScenariosThroughSnapshot(t *testing.T) {
	cat := catalog.MustAWS()
	for _, s := range loadAll(t) {
		t.Run(s.Name, func(t *testing.T) {
			set, err := s.Set()
			if err != nil {
				t.Fatal(err)
			}
			direct, in, err := planner.Plan(set, cat, cloud.NodeSettingsFor)
			if err != nil {
				t.Fatal(err)
			}
			snap := &events.Snapshot{SchemaVersion: events.SnapshotSchemaVersion, Cluster: "scenario", Revision: 1,
				Time: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
			for _, p := range in.Pods {
				snap.PendingPods = append(snap.PendingPods, *p)
			}
			for _, p := range in.BoundPods {
				snap.Pods = append(snap.Pods, *p)
			}
			for _, n := range in.Nodes {
				snap.Nodes = append(snap.Nodes, *n)
			}
			for _, d := range in.DaemonSets {
				snap.DaemonSets = append(snap.DaemonSets, *d)
			}
			for _, x := range in.NodePools {
				snap.NodePools = append(snap.NodePools, *x)
			}
			snap.NodeClasses = append(snap.NodeClasses, in.NodeClasses...)
			for _, x := range in.NodeClaims {
				snap.NodeClaims = append(snap.NodeClaims, *x)
			}
			for _, x := range in.PVCs {
				snap.PVCs = append(snap.PVCs, *x)
			}
			for _, x := range in.PVs {
				snap.PVs = append(snap.PVs, *x)
			}
			for _, x := range in.StorageClasses {
				snap.StorageClasses = append(snap.StorageClasses, *x)
			}
			for _, x := range in.LimitRanges {
				snap.LimitRanges = append(snap.LimitRanges, *x)
			}
			enc, err := events.EncodeSnapshot(snap)
			if err != nil {
				t.Fatal(err)
			}
			dec, err := events.DecodeSnapshot(enc)
			if err != nil {
				t.Fatal(err)
			}
			viaSnap, err := provisioning.Solve(provisioning.InputFromSnapshot(dec, cat, cloud.NodeSettingsFor))
			if err != nil {
				t.Fatal(err)
			}
			if a, b := describe(direct), describe(viaSnap); a != b {
				t.Errorf("%s: plan through the snapshot differs:\n direct: %s\n snapshot: %s", s.Name, a, b)
			}
		})
	}
}

// describe renders a plan canonically: each NodeClaim's pool, offerings and pods, placements on
// existing nodes, and unschedulable pods with reasons.
func describe(p *provisioning.Plan) string {
	var parts []string
	for _, nc := range p.NodeClaims {
		var pods []string
		for _, x := range nc.Pods {
			pods = append(pods, key(x))
		}
		sort.Strings(pods)
		var offs []string
		for _, o := range nc.Offerings {
			offs = append(offs, fmt.Sprintf("%s/%s/%s/%g", o.InstanceType.Name, o.Zone, o.CapacityType, o.PricePerHour))
		}
		parts = append(parts, fmt.Sprintf("claim %s %v %v", nc.NodePool.Name, offs, pods))
	}
	for _, e := range p.ExistingNodes {
		var pods []string
		for _, x := range e.Pods {
			pods = append(pods, key(x))
		}
		sort.Strings(pods)
		parts = append(parts, fmt.Sprintf("node %s %v", e.Name, pods))
	}
	for _, u := range p.Unschedulable {
		parts = append(parts, fmt.Sprintf("unschedulable %s: %s", key(u.Pod), u.Reason))
	}
	return strings.Join(parts, "\n")
}

// The checker must catch wrong expectations: this scenario (one 1-vCPU pod, a pool of m5.large
// and m5.xlarge on-demand; the plan is one m5.large at 0.096 $/h whose offerings span five
// zones) carries an expectation of every kind that does not hold, and each must be reported.
func TestCheckReportsEveryFailure(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "wrong.yaml")
	const doc = `description: every expectation wrong
manifests: |
  apiVersion: karpenter.sh/v1
  kind: NodePool
  metadata: {name: default}
  spec:
    template:
      spec:
        nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
        requirements:
          - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large, m5.xlarge]}
          - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
  ---
  apiVersion: v1
  kind: Pod
  metadata: {name: a, labels: {app: a}}
  spec: {containers: [{name: c, image: x, resources: {requests: {cpu: "1", memory: 1Gi}}}]}
  ---
  apiVersion: v1
  kind: Pod
  metadata: {name: b, labels: {app: a}}
  spec: {containers: [{name: c, image: x, resources: {requests: {cpu: 100m, memory: 1Gi}}}]}
expect:
  launches: 2
  launchesAtMost: 0
  allowedInstanceTypes: ["c5.*"]
  forbiddenInstanceTypes: ["m5.xlarge"]
  labels:
    - {key: kubernetes.io/arch, operator: In, values: [arm64]}
  podsPerZone:
    - selector: {matchLabels: {app: a}}
      zones: {us-east-1a: 1}
  podsApart: [[a, b]]
  podsTogether: [[a, ghost]]
  unschedulable:
    - {pod: b, reasonContains: "too big"}
  onExistingNodes: {a: node-x}
  maxPricePerHour: 0.05
`
	if err := os.WriteFile(file, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Load(file)
	if err != nil {
		t.Fatal(err)
	}
	_, fails, err := s.Run(catalog.MustAWS(), cloud.NodeSettingsFor)
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Join(fails, "\n")
	for _, want := range []string{
		"launches: got 1 NodeClaims, want 2",
		"launchesAtMost: got 1 NodeClaims, want at most 0",
		"allowedInstanceTypes: NodeClaim #0 offers [m5.large m5.xlarge], not in [c5.*]",
		"forbiddenInstanceTypes: NodeClaim #0 offers [m5.xlarge]",
		"labels: NodeClaim #0 has offerings that break kubernetes.io/arch In [arm64]",
		"podsPerZone[0]: pod default/a on new NodeClaim #0 is not pinned to one topology.kubernetes.io/zone",
		"podsApart[0]: pods default/a and default/b share new NodeClaim #0",
		`podsTogether[0]: pattern "default/ghost" matches no pod`,
		`unschedulable: pod default/b was placed (new NodeClaim #0), want it unschedulable ("too big")`,
		"onExistingNodes: pod default/a is on new NodeClaim #0, want node node-x",
		"maxPricePerHour: plan costs 0.096000 USD/h, want at most 0.050000",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("missing failure %q in:\n%s", want, all)
		}
	}
	// 11 expectations; podsPerZone reports each of the two unpinned pods and the missing count.
	if len(fails) != 13 {
		t.Errorf("got %d failures, want 13:\n%s", len(fails), all)
	}
}

func TestLoadRefusesBadScenarios(t *testing.T) {
	dir := t.TempDir()
	for name, c := range map[string]struct{ doc, want string }{
		"unknown field":  {"description: x\nmanifests: a\nexpect: {launch: 1}\n", `unknown field "launch"`},
		"no manifests":   {"description: x\nexpect: {launches: 1}\n", "manifests or manifestFiles: required"},
		"no description": {"manifests: a\n", "description: required"},
		"bad label op":   {"description: x\nmanifests: a\nexpect: {labels: [{key: k, operator: Maybe}]}\n", "expect.labels[0]: k: operator \"Maybe\""},
	} {
		f := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".yaml")
		if err := os.WriteFile(f, []byte(c.doc), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(f); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", name, err, c.want)
		}
	}
}

// The independent request formula, worked by hand from the Kubernetes docs' examples.
func TestPodRequests(t *testing.T) {
	set := `apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  overhead: {cpu: 250m, memory: 120Mi}
  initContainers:
    - {name: big-init, image: x, resources: {requests: {cpu: "3", memory: 1Gi}}}
    - {name: sidecar, image: x, restartPolicy: Always, resources: {requests: {cpu: 500m, memory: 512Mi}}}
    - {name: late-init, image: x, resources: {requests: {cpu: "1", memory: 4Gi}}}
  containers:
    - {name: app, image: x, resources: {requests: {cpu: "1"}, limits: {cpu: "2", memory: 2Gi}}}
`
	dir := t.TempDir()
	f := filepath.Join(dir, "p.yaml")
	if err := os.WriteFile(f, []byte("description: d\nmanifests: |\n  "+strings.ReplaceAll(set, "\n", "\n  ")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Load(f)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := s.Set()
	if err != nil {
		t.Fatal(err)
	}
	cpu, mem := podRequests(ms.Pods[0])
	// cpu: max(app 1 + sidecar 0.5 = 1.5, big-init 3, sidecar 0.5, late-init 1 + 0.5) = 3, + 0.25 overhead.
	// memory: app's limit 2Gi defaults its request; max(2Gi + 512Mi, 1Gi, 512Mi, 4Gi + 512Mi) = 4608Mi, + 120Mi.
	if cpu != 3250 || mem != (4608+120)<<20 {
		t.Errorf("requests = %dm, %dMi; want 3250m, 4728Mi", cpu, mem>>20)
	}
}
