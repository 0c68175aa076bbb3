package main

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dovetail-dev/dovetail/shared/disruption"
	"github.com/dovetail-dev/dovetail/shared/provisioning"
)

// The dump's nodes by the letters of shared/preview/previewtest's hand calculation.
const (
	nodeA = "ip-10-0-1-10.ec2.internal" // m5.xlarge 1a 0.192: web ×3 (1000m), PDB shop/web allows 1; free 820m
	nodeB = "ip-10-0-1-11.ec2.internal" // m5.xlarge 1a 0.192: api (500m); free 3320m
	nodeC = "ip-10-0-1-12.ec2.internal" // m5.large 1a 0.096: worker ×2 (700m), image ami-old: drifted
	nodeD = "ip-10-0-1-13.ec2.internal" // c5.large 1b 0.085: cache (800m, zone 1b), expireAfter 1h: expired at liveAt
	nodeE = "ip-10-0-1-14.ec2.internal" // m5.large 1b 0.096: report (300m, do-not-disrupt); free 1530m
	nodeF = "ip-10-0-1-15.ec2.internal" // m5.large 1b 0.096: db ×2 (600m), PDB shop/db allows 0
	nodeH = "ip-10-0-1-16.ec2.internal" // m5.large 1a 0.096: empty
	nodeG = "ip-10-0-2-20.ec2.internal" // t3.medium, node group "system" (no NodePool): coredns ×2
)

func explainNodeJSON(t *testing.T, node string) *NodeExplanationOutput {
	t.Helper()
	code, out, stderr := runCLI(t, "explain", "node", node, "-f", liveDump, "--at", liveAt, "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var x NodeExplanationOutput
	if err := json.Unmarshal([]byte(out), &x); err != nil {
		t.Fatal(err)
	}
	return &x
}

// Each node of the dump, explained at liveAt (the snapshot before any round of the preview:
// nothing disrupting, so the default budget, 10 % of 7 nodes rounded up = 1, allows one node and
// no budget blocks). Removal is the consolidate function's single-node simulation: the moved
// pods go first fit by node name to the nodes with room (free CPU from the calculation).
func TestExplainNodeOnClusterDump(t *testing.T) {
	type move struct{ pod, to string }
	cases := []struct {
		node     string
		blockers []disruption.Blocker
		moves    []move
		drift    string
	}{
		// A: 3 web pods, PDB shop/web allows 1: the second pod's eviction is the one refused.
		// Its pods (3 × 1000m) fit B (3320m free) and nowhere before it (A itself is removed).
		{nodeA, []disruption.Blocker{{Kind: disruption.BlockerPDB, Object: disruption.ObjectRef{Kind: "PodDisruptionBudget", Namespace: "shop", Name: "web"},
			Message: "PodDisruptionBudget shop/web allows 1 disruption(s); evicting pod shop/web-64f49c9779-hcrrs would need 2"}},
			[]move{{"shop/web-64f49c9779-br5nq", nodeB}, {"shop/web-64f49c9779-hcrrs", nodeB}, {"shop/web-64f49c9779-m7fwg", nodeB}}, "NotDrifted"},
		// B: api (500m) fits A (820m free).
		{nodeB, nil, []move{{"shop/api-5489bdccd7-f2zgr", nodeA}}, "NotDrifted"},
		// C: workers (700m): the first to A (820m), the second to B; drifted (ami-old) and the
		// budget (1) lets drift take it now.
		{nodeC, nil, []move{{"shop/worker-796d79cfd8-2knqq", nodeA}, {"shop/worker-796d79cfd8-2xhkd", nodeB}}, "Selected"},
		// D: cache needs zone 1b: E (1530m free) is the first 1b node by name; D is expired.
		{nodeD, nil, []move{{"shop/cache-699574d6c-tglpb", nodeE}}, "Expired"},
		// E: report is annotated do-not-disrupt; it would fit A (300m ≤ 820m).
		{nodeE, []disruption.Blocker{{Kind: disruption.BlockerDoNotDisrupt, Object: disruption.ObjectRef{Kind: "Pod", Namespace: "shop", Name: "report-74ddf5bf4f-86x2p"},
			Message: "pod shop/report-74ddf5bf4f-86x2p is annotated karpenter.sh/do-not-disrupt"}},
			[]move{{"shop/report-74ddf5bf4f-86x2p", nodeA}}, "NotDrifted"},
		// F: PDB shop/db allows 0: the first db pod is refused. db (600m) → A (820m), then A has
		// 220m left and the second goes to B.
		{nodeF, []disruption.Blocker{{Kind: disruption.BlockerPDB, Object: disruption.ObjectRef{Kind: "PodDisruptionBudget", Namespace: "shop", Name: "db"},
			Message: "PodDisruptionBudget shop/db allows 0 disruption(s); evicting pod shop/db-74cfb467db-b7c48 would need 1"}},
			[]move{{"shop/db-74cfb467db-b7c48", nodeA}, {"shop/db-74cfb467db-xhgb9", nodeB}}, "NotDrifted"},
		// H: empty: nothing moves, its whole price is saved.
		{nodeH, nil, nil, "NotDrifted"},
		// G: no karpenter.sh/nodepool label: neither consolidation nor drift manages it.
		{nodeG, []disruption.Blocker{{Kind: disruption.BlockerNoNodePool, Object: disruption.ObjectRef{Kind: "Node", Name: nodeG},
			Message: "node has no karpenter.sh/nodepool label: no NodePool manages it"}},
			[]move{{"kube-system/coredns-6b8f957975-7jmtc", nodeA}, {"kube-system/coredns-6b8f957975-bzpbt", nodeA}}, "NotManaged"},
	}
	for _, c := range cases {
		t.Run(c.node, func(t *testing.T) {
			x := explainNodeJSON(t, c.node)
			got := x.Consolidation.Blockers
			if len(got) != len(c.blockers) {
				t.Fatalf("blockers %+v, want %+v", got, c.blockers)
			}
			for i := range got {
				if got[i] != c.blockers[i] {
					t.Errorf("blocker %d: %+v, want %+v", i, got[i], c.blockers[i])
				}
			}
			r := x.Consolidation.Removal
			if len(r.Moves) != len(c.moves) || len(r.Replacements) != 0 || len(r.Stranded) != 0 {
				t.Fatalf("removal %+v, want moves %v and no new NodeClaim", r, c.moves)
			}
			for i, m := range c.moves {
				if r.Moves[i].Pod != m.pod || r.Moves[i].Node != m.to || r.Moves[i].Replacement != -1 {
					t.Errorf("move %d: %+v, want %s → %s", i, r.Moves[i], m.pod, m.to)
				}
			}
			if r.PriceAfter != 0 || r.Savings != r.PriceBefore {
				t.Errorf("removal prices %+v: no new NodeClaim, so the node's whole price is saved", r)
			}
			if x.Drift.State != c.drift {
				t.Errorf("drift %+v, want %s", x.Drift, c.drift)
			}
		})
	}
}

// The text form of node A, reviewed line by line against the calculation above.
func TestExplainNodeText(t *testing.T) {
	code, out, stderr := runCLI(t, "explain", "node", nodeA, "-f", liveDump, "--at", liveAt)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	want := `Node ip-10-0-1-10.ec2.internal (NodePool default, NodeClaim default-4fkq2): m5.xlarge on-demand in us-east-1a, 0.1920 USD/h
  Why it exists: NodeClaim default-4fkq2 of NodePool default carries no Dovetail decision annotation (launched by Karpenter, or its planned pods have all been bound)
  Consolidation blocked by:
    - [PodDisruptionBudget] PodDisruptionBudget/shop/web: PodDisruptionBudget shop/web allows 1 disruption(s); evicting pod shop/web-64f49c9779-hcrrs would need 2
  Removing it: 3 pod(s) move; 0.1920 USD/h before, 0.0000 USD/h after (saves 0.1920 USD/h)
    shop/web-64f49c9779-br5nq → ip-10-0-1-11.ec2.internal
    shop/web-64f49c9779-hcrrs → ip-10-0-1-11.ec2.internal
    shop/web-64f49c9779-m7fwg → ip-10-0-1-11.ec2.internal
  Drift: NotDrifted (the NodeClaim matches its NodePool and NodeClass, and has not expired)
`
	if out != want {
		t.Errorf("got\n%s\nwant\n%s", out, want)
	}
}

var seedScenario = []string{"-f", "../../localdev/manifests/nodepool.yaml", "-f", "../../localdev/manifests/system-nodes.yaml",
	"-f", "../../localdev/manifests/workloads.yaml", "-f", "testdata/explain/refused.yaml"}

func explainPodJSON(t *testing.T, pod string, input ...string) *PodExplanation {
	t.Helper()
	code, out, stderr := runCLI(t, append(append([]string{"explain", "pod", pod}, input...), "--at", liveAt, "-o", "json")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var x PodExplanation
	if err := json.Unmarshal([]byte(out), &x); err != nil {
		t.Fatal(err)
	}
	return &x
}

// The seed scenario's NodePool default allows kubernetes.io/arch In [amd64 arm64]: a pod
// selecting s390x is refused by that requirement. A 500-CPU pod fits no instance type (the
// embedded catalog's largest has fewer than 500 vCPUs). A seed workload pod gets a NodeClaim of
// NodePool default.
func TestExplainPodSeedScenario(t *testing.T) {
	x := explainPodJSON(t, "default/mainframe", seedScenario...)
	want := provisioning.Refusal{NodePool: "default", Kind: provisioning.RefusalRequirement,
		Message: `nodepool "default": requirement kubernetes.io/arch In [amd64 arm64] conflicts with the pod's kubernetes.io/arch In [s390x]`}
	if x.Status != "Pending" || x.Placement != nil || len(x.Refusals) != 1 || x.Refusals[0] != want {
		t.Errorf("mainframe: %+v, want one refusal %+v", x, want)
	}
	x = explainPodJSON(t, "default/huge", seedScenario...)
	if len(x.Refusals) != 1 || x.Refusals[0].NodePool != "default" || x.Refusals[0].Kind != provisioning.RefusalCapacity ||
		!strings.HasPrefix(x.Refusals[0].Message, `nodepool "default": no instance type fits the pod's requests (cpu=500000m memory=1024Mi pods=1; largest compatible type `) {
		t.Errorf("huge: %+v, want the capacity refusal of NodePool default", x.Refusals)
	}
	x = explainPodJSON(t, "default/frontend-0", seedScenario...)
	if x.Placement == nil || x.Placement.Target != TargetNewNodeClaim || x.Placement.NodePool != "default" || len(x.Refusals) != 0 {
		t.Errorf("frontend-0: %+v, want a new NodeClaim of NodePool default", x)
	}
	code, _, stderr := runCLI(t, append([]string{"explain", "pod", "default/nothere"}, seedScenario...)...)
	if code != exitInvalidInput || !strings.Contains(stderr, "pod default/nothere: not in the input") {
		t.Errorf("missing pod: exit %d, %s", code, stderr)
	}
	code, _, stderr = runCLI(t, append([]string{"explain", "pod", "nothere"}, seedScenario...)...)
	if code != exitInvalidInput || !strings.Contains(stderr, `pod: "nothere" is not NAMESPACE/NAME`) {
		t.Errorf("bad name: exit %d, %s", code, stderr)
	}
}

// A bound pod of the dump: report runs on E, whose NodeClaim carries no decision annotation;
// E's pods are node-agent (100m) and report (300m).
func TestExplainPodBound(t *testing.T) {
	x := explainPodJSON(t, "shop/report-74ddf5bf4f-86x2p", "-f", liveDump)
	if x.Status != "Bound" || x.Node != nodeE || x.Origin == nil || x.Origin.LaunchedBy != LaunchedByUnknown || x.Origin.NodeClaim != "default-k9mrs" {
		t.Fatalf("report: %+v", x)
	}
	if x.Fit == nil || x.Fit.NodePods != 2 || !strings.HasPrefix(x.Fit.Requests, "cpu=300m ") || !strings.HasPrefix(x.Fit.NodePodsRequests, "cpu=400m ") {
		t.Errorf("fit %+v, want report's 300m and the node's 100m + 300m", x.Fit)
	}
}

// withClaimAnnotations is the dump with lines added to the annotations of NodeClaim name.
func withClaimAnnotations(t *testing.T, name string, lines ...string) string {
	t.Helper()
	raw, err := os.ReadFile(liveDump)
	if err != nil {
		t.Fatal(err)
	}
	items := strings.Split(string(raw), "\n- ")
	for i, it := range items {
		if strings.Contains(it, "\n  kind: NodeClaim\n") && strings.Contains(it, "\n    name: "+name+"\n") {
			items[i] = strings.Replace(it, "\n    annotations:\n", "\n    annotations:\n      "+strings.Join(lines, "\n      ")+"\n", 1)
			return strings.Join(items, "\n- ")
		}
	}
	t.Fatalf("NodeClaim %s not in the dump", name)
	return ""
}

// Why a node exists is read from its NodeClaim's decision annotations: a consolidation
// replacement names its decision and the nodes it replaces; a provisioned NodeClaim its planned
// pods and snapshot revision.
func TestExplainNodeOrigin(t *testing.T) {
	cases := []struct {
		lines []string
		want  NodeOrigin
	}{
		{[]string{`dovetail.dev/disruption-decision: underutilized-abc123`, `dovetail.dev/replaces: "n2,n1"`, `dovetail.dev/snapshot-revision: "41"`},
			NodeOrigin{Node: nodeA, NodeClaim: "default-4fkq2", NodePool: "default", LaunchedBy: LaunchedByDisruption, Decision: "underutilized-abc123",
				Replaces: []string{"n1", "n2"}, Revision: "41",
				Message: "NodeClaim default-4fkq2 is a replacement launched by disruption decision underutilized-abc123 for node(s) n1, n2 (snapshot revision 41)"}},
		{[]string{`dovetail.dev/planned-pods: shop/web-0,shop/web-1`, `dovetail.dev/snapshot-revision: "7"`},
			NodeOrigin{Node: nodeA, NodeClaim: "default-4fkq2", NodePool: "default", LaunchedBy: LaunchedByProvision, Revision: "7",
				PlannedPods: []string{"shop/web-0", "shop/web-1"},
				Message:     "NodeClaim default-4fkq2 was launched by the provision function from NodePool default for 2 pending pod(s): shop/web-0, shop/web-1 (snapshot revision 7)"}},
	}
	for _, c := range cases {
		dump := withClaimAnnotations(t, "default-4fkq2", c.lines...)
		code, out, stderr := runCLIWithStdin(t, dump, "explain", "node", nodeA, "-f", "-", "--at", liveAt, "-o", "json")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		var x NodeExplanationOutput
		if err := json.Unmarshal([]byte(out), &x); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(x.Origin, c.want) {
			t.Errorf("origin\n%+v, want\n%+v", x.Origin, c.want)
		}
	}
}

var heldScenario = []string{"-f", "../../localdev/manifests/nodepool.yaml", "-f", "../../localdev/manifests/system-nodes.yaml",
	"-f", "testdata/explain/held.yaml"}

// The pods testdata/explain/held.yaml's header works out, through the provision function's own
// steps (quarantine.Evaluate, the solver under the rate policies, provisioning.HoldAnomalies).
func TestExplainPodHeldBack(t *testing.T) {
	// Quarantine: Deployment shop/bad (ReplicaSet bad-7d9f8c6b5 with the pod-template-hash
	// label) has 1 running pod, sick; allowance 1 − 0 on trial = 1 admitted (p1, the older),
	// p2 held. The pods run on a system node: no NodePool, so the defaults applied.
	x := explainPodJSON(t, "shop/bad-7d9f8c6b5-p2", heldScenario...)
	if q := x.Quarantine; q == nil || q.Controller != "Deployment shop/bad" || q.NodePool != "" ||
		!strings.Contains(q.Message, "1 of its 1 running pods are sick (1 crash-looping") ||
		!strings.Contains(q.Message, "pod shop/bad-7d9f8c6b5-r1 container app: CrashLoopBackOff, 5 restarts") ||
		!strings.Contains(q.Message, "so 1 pending replicas wait") || x.Placement != nil || len(x.Refusals) != 0 {
		t.Errorf("bad p2: %+v, want held by the quarantine of Deployment shop/bad", x)
	}
	x = explainPodJSON(t, "shop/bad-7d9f8c6b5-p1", heldScenario...)
	if x.Quarantine != nil || x.Placement == nil || x.Placement.Target != TargetNewNodeClaim || x.Placement.NodePool != "default" {
		t.Errorf("bad p1: %+v, want admitted and planned on a NodeClaim of NodePool default", x)
	}
	// Rate policy: NodePool rated adds no node (selectPolicy Disabled): the solver's limit
	// refusal, of kind Guardrail, names the annotation.
	x = explainPodJSON(t, "default/rated-job", heldScenario...)
	var rated *provisioning.Refusal
	for i := range x.Refusals {
		if x.Refusals[i].NodePool == "rated" {
			rated = &x.Refusals[i]
		}
	}
	if rated == nil || rated.Kind != provisioning.RefusalGuardrail ||
		!strings.Contains(rated.Message, "scale-up nodes=0 (dovetail.dev/scale-up-policies selectPolicy Disabled)") {
		t.Errorf("rated-job: %+v, want NodePool rated's Guardrail refusal naming its scale-up policy", x.Refusals)
	}
	// Anomaly hold: NodePool burst has no node, so its trailing average is 0 USD/h and one new
	// NodeClaim is above 3 × 0: held, with the hold ID of the decision's time
	// (2026-12-02T07:39:58Z = 1796197198 s after the Unix epoch).
	x = explainPodJSON(t, "default/burst-job", heldScenario...)
	if len(x.Refusals) != 1 || x.Refusals[0].NodePool != "burst" || x.Refusals[0].Kind != provisioning.RefusalScaleUpHeld ||
		!strings.HasPrefix(x.Refusals[0].Message, `nodepool "burst": scale-up held: hold-1796197198: holding 1 new nodes raising the NodePool's price from 0.0000 to `) ||
		!strings.Contains(x.Refusals[0].Message, "kubectl annotate nodepool burst dovetail.dev/approve-scale-up=hold-1796197198") {
		t.Errorf("burst-job: %+v, want NodePool burst's anomaly hold", x.Refusals)
	}
}

var provreqScenario = []string{"-f", "../../localdev/manifests/nodepool.yaml", "-f", "testdata/explain/provreq.yaml"}

// The consumers of testdata/explain/provreq.yaml, explained at liveAt: each is held back by the
// provision function's rule (provreq.HoldBack) and named with its request, the request's class
// and conditions as the dump has them; the booking of ml/booked runs 10 minutes from its
// Provisioned transition at 07:35:00, to 07:45:00; ml/later does not exist.
func TestExplainPodProvisioningRequest(t *testing.T) {
	code, out, stderr := runCLI(t, append([]string{"explain", "pod", "ml/train-0", "--at", liveAt}, provreqScenario...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	want := `Pod ml/train-0: Pending
  Held back from ordinary provisioning, it waits for ProvisioningRequest ml/train (best-effort-atomic-scale-up.autoscaling.x-k8s.io) to be provisioned (Provisioned=False CapacityIsNotFound: Capacity is not found: the cloud refused 6 of 16 nodes; none was kept; retried on the next decision)
    Accepted=True Accepted: ProvisioningRequest is accepted by Dovetail (since 2026-12-02T07:30:01Z)
    Provisioned=False CapacityIsNotFound: Capacity is not found: the cloud refused 6 of 16 nodes; none was kept; retried on the next decision (since 2026-12-02T07:30:01Z)
`
	if out != want {
		t.Errorf("got\n%s\nwant\n%s", out, want)
	}
	x := explainPodJSON(t, "ml/booked-0", provreqScenario...)
	r := x.ProvisioningRequest
	if r == nil || r.Request != "ml/booked" || r.Class != "check-capacity.autoscaling.x-k8s.io" || !r.Found || r.State != "Booked" ||
		r.BookedUntil == nil || r.BookedUntil.UTC().Format(time.RFC3339) != "2026-12-02T07:45:00Z" || len(r.Conditions) != 2 || x.Placement != nil || len(x.Refusals) != 0 {
		t.Errorf("booked-0: %+v", r)
	}
	x = explainPodJSON(t, "ml/early-0", provreqScenario...)
	if r := x.ProvisioningRequest; r == nil || r.Request != "ml/later" || r.Found || r.Class != "best-effort-atomic-scale-up.autoscaling.x-k8s.io" ||
		r.Message != "waits for ProvisioningRequest ml/later (best-effort-atomic-scale-up.autoscaling.x-k8s.io), which is not found: "+
			"pods that consume a ProvisioningRequest are not provisioned for on their own, as Cluster Autoscaler keeps them out of scale-up" {
		t.Errorf("early-0: %+v", x.ProvisioningRequest)
	}
	// plan holds the same three back: its one NodeClaim is ml/plain's.
	code, out, stderr = runCLI(t, append([]string{"plan", "--at", liveAt, "-o", "json"}, provreqScenario...)...)
	if code != 0 {
		t.Fatalf("plan: exit %d: %s", code, stderr)
	}
	var plan PlanOutput
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatal(err)
	}
	var held []string
	for _, h := range plan.Held {
		held = append(held, h.Pod+" "+h.Request)
	}
	if w := []string{"ml/train-0 ml/train", "ml/booked-0 ml/booked", "ml/early-0 ml/later"}; !reflect.DeepEqual(held, w) {
		t.Errorf("plan held %v, want %v", held, w)
	}
	if len(plan.NodeClaims) != 1 || !reflect.DeepEqual(plan.NodeClaims[0].Pods, []string{"ml/plain"}) || len(plan.Unschedulable) != 0 {
		t.Errorf("plan %+v, want one NodeClaim for ml/plain", plan.NodeClaims)
	}
}
