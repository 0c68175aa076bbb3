//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/dovetail-dev/dovetail/e2e/realcluster"
	"github.com/dovetail-dev/dovetail/functions/provision"
	"github.com/dovetail-dev/dovetail/localdev"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/scheduling"
)

// BindDeadline is the bar: every pod is bound within 60 s of the simulated boot of the
// node it was planned for (the Node's creation, which is when the fake cloud registers it as a
// kubelet would).
const BindDeadline = 60 * time.Second

// bootDelay is the fake instances' simulated boot time (localdev's --boot-delay).
const bootDelay = 2 * time.Second

// TestRealControlPlane applies the seed scenario (NodePool, EC2NodeClass, EKS-like system nodes,
// DaemonSets and the default workloads as Deployments/StatefulSets/Jobs) to a real control plane:
// kube-controller-manager creates the pods, Dovetail launches nodes, kube-scheduler binds the
// pods. Then a PDB-protected Deployment is drained off its node through the agent.
func TestRealControlPlane(t *testing.T) {
	if _, _, _, err := (&realcluster.Options{}).Binaries(); err != nil {
		// Never skip: this suite is run on purpose (make e2e), a missing binary is a setup error.
		t.Fatalf("the e2e suite needs the control-plane binaries: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	// DOVETAIL_E2E_DIR keeps the control plane's data and component logs (default: a test temp dir).
	dir := os.Getenv("DOVETAIL_E2E_DIR")
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	plans := &planRecorder{}
	begin := time.Now()
	env, err := localdev.Start(ctx, localdev.Options{
		Cluster:          "e2e",
		ControlPlane:     localdev.ControlPlaneReal,
		BootDelay:        bootDelay,
		RegistrationTTL:  registrationTTL,
		NodeClassRefresh: nodeClassRefresh,
		// The real AWS provider (aws-sdk-go-v2) against the fake cloud's EC2/SSM/IAM face: launch
		// templates, instance profiles and NodeClass resolution cross the real wire protocols.
		CloudProvider:    localdev.CloudAWS,
		Out:              os.Stdout,
		Log:              slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
		OnDecision:       plans.add,
		RealControlPlane: realcluster.Options{Dir: dir},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(env.Stop)
	started := time.Since(begin)
	if err := env.WaitAllBound(ctx); err != nil {
		t.Fatalf("%v\ncontrol plane: %s", err, env.ControlPlane.Exited())
	}
	t.Logf("timing: control plane + scenario applied in %s, every workload pod bound after %s", started.Round(100*time.Millisecond),
		time.Since(begin).Round(100*time.Millisecond))

	t.Run("SeedScenarioScheduledByKubeScheduler", func(t *testing.T) { checkPlacement(ctx, t, env, plans) })
	t.Run("NodeClaimsReady", func(t *testing.T) { checkNodeClaimsReady(ctx, t, env) })
	t.Run("KarpenterEventsOnSeed", func(t *testing.T) { checkSeedEvents(ctx, t, env) })
	t.Run("FailedSchedulingEvent", func(t *testing.T) { checkFailedScheduling(ctx, t, env) })
	t.Run("NodeClassReady", func(t *testing.T) { checkNodeClassReady(ctx, t, env) })
	t.Run("AgentRunsWithLeastPrivilege", func(t *testing.T) { checkAgentRBAC(ctx, t, env) })
	t.Run("NotReadyClassLaunchesNothing", func(t *testing.T) { checkNotReadyClassLaunchesNothing(ctx, t, env) })
	odNode := ""
	t.Run("NodesCarryKarpentersLabels", func(t *testing.T) { odNode = checkNodeLabels(ctx, t, env) })
	t.Run("DeleteNodeClaimTerminates", func(t *testing.T) {
		if odNode == "" {
			t.Skip("no on-demand node from NodesCarryKarpentersLabels")
		}
		checkDeleteNodeClaim(ctx, t, env, odNode)
	})
	t.Run("LivenessReapsLaunchThatNeverRegisters", func(t *testing.T) { checkLiveness(ctx, t, env) })
	t.Run("PDBHoldsDuringDrain", func(t *testing.T) {
		begin := time.Now()
		checkPDBDrain(ctx, t, env, logs)
		t.Logf("timing: drain scenario took %s", time.Since(begin).Round(100*time.Millisecond))
	})
	t.Run("TerminationDrainsInGroupsAndWaitsForVolumes", func(t *testing.T) { checkTerminationOrderAndVolumes(ctx, t, env) })
	// Last: the new AMI makes the drift function start replacing the seed nodes.
	t.Run("AMIDriftOnRefresh", func(t *testing.T) { checkAMIDriftOnRefresh(ctx, t, env) })
	t.Run("DisruptingEventOnDrift", func(t *testing.T) { checkDisrupting(ctx, t, env) })
	// After drift: its pool and pod change no earlier check.
	t.Run("NodeOverlayPricesALaunch", func(t *testing.T) { checkNodeOverlay(ctx, t, env) })
	// Last: it limits the fake cloud's c5.large capacity (cleared when it ends) and its own
	// pools' nodes stay.
	t.Run("ProvisioningRequests", func(t *testing.T) { checkProvisioningRequests(ctx, t, env, plans) })
	if t.Failed() {
		t.Logf("control plane: %s (component logs in %s)", env.ControlPlane.Exited(), dir)
		t.Logf("agent and function logs (warnings and errors):\n%s", logs.filter("level=WARN", "level=ERROR"))
	}
}

// checkPlacement asserts every workload pod is bound (and Running under kwok) within BindDeadline
// of its node's boot, that every launched node runs workload pods, and reports each pod the
// scheduler put somewhere other than the plan said, with the scheduler's own words from the
// pod's events.
func checkPlacement(ctx context.Context, t *testing.T, env *localdev.Env, plans *planRecorder) {
	kc := env.Cluster.Kube
	// kwok starts bound pods within about a second; give it a few.
	var pods *corev1.PodList
	waitStart := time.Now()
	_ = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		if pods, err = kc.CoreV1().Pods("").List(ctx, metav1.ListOptions{}); err != nil {
			return false, nil
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			if !scheduling.IsTerminal(p) && p.Status.Phase != corev1.PodRunning {
				return false, nil
			}
		}
		return true, nil
	})
	if pods == nil {
		t.Fatal("could not list pods")
	}
	t.Logf("every pod Running (kwok) %s after the last bind", time.Since(waitStart).Round(100*time.Millisecond))
	nodes, err := kc.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	insts, err := env.Cloud.List(ctx, env.Options.Cluster)
	if err != nil {
		t.Fatal(err)
	}
	launched := map[string]bool{} // provider IDs of instances Dovetail launched
	for _, i := range insts {
		launched[i.ProviderID] = true
	}
	nodeByName := map[string]*corev1.Node{}
	nodeByProvider := map[string]string{}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		nodeByName[n.Name] = n
		nodeByProvider[n.Spec.ProviderID] = n.Name
	}
	if len(launched) == 0 {
		t.Fatal("Dovetail launched no instance for the seed scenario")
	}
	planned := plans.plannedNodes(nodeByProvider)

	workloadPods := map[string]int{}
	var slowest time.Duration
	var slowestPod string
	var disagreements []string
	total, plannedSeen := 0, 0
	for i := range pods.Items {
		p := &pods.Items[i]
		if scheduling.IsTerminal(p) || scheduling.IsDaemonSetPod(p) {
			continue
		}
		total++
		key := p.Namespace + "/" + p.Name
		if p.Spec.NodeName == "" {
			t.Errorf("pod %s is not bound", key)
			continue
		}
		workloadPods[p.Spec.NodeName]++
		if p.Status.Phase != corev1.PodRunning {
			t.Errorf("pod %s on %s is %s, want Running (kwok plays the kubelet)", key, p.Spec.NodeName, p.Status.Phase)
		}
		// Bound: the scheduler sets PodScheduled=True when it binds. The clock starts at the later
		// of the pod's creation and the boot of the node the plan gave it (else where it landed).
		bound, ok := conditionTime(p, corev1.PodScheduled)
		if !ok {
			t.Errorf("pod %s is bound to %s but has no PodScheduled=True condition", key, p.Spec.NodeName)
			continue
		}
		from := p.CreationTimestamp.Time
		target := planned[key]
		if target == "" {
			target = p.Spec.NodeName
		}
		if n := nodeByName[target]; n != nil && launched[n.Spec.ProviderID] && n.CreationTimestamp.After(from) {
			from = n.CreationTimestamp.Time
		}
		if d := bound.Sub(from); d > BindDeadline {
			t.Errorf("pod %s was bound %s after its node %s booted (or it was created), want <= %s", key, d, target, BindDeadline)
		} else if slowestPod == "" || d > slowest {
			slowest, slowestPod = d, key
		}
		if planned[key] != "" {
			plannedSeen++
		}
		if planned[key] != "" && planned[key] != p.Spec.NodeName {
			disagreements = append(disagreements, fmt.Sprintf("%s: planned on %s, kube-scheduler bound it to %s at %s: %s [plans: %s]",
				key, planned[key], p.Spec.NodeName, bound.Format(time.TimeOnly), schedulerWords(ctx, t, env, p), plans.history(key)))
		}
	}
	t.Logf("%d workload pods bound on %d nodes (%d launched by Dovetail); slowest bind after its node's boot: %s (%s; API timestamps have 1 s resolution)",
		total, len(workloadPods), len(launched), slowest.Round(time.Second), slowestPod)

	// A launched node without workload pods is a failure when the plan gave it none, or when a
	// pod the plan gave it is not bound: then the plan over-provisioned. When every pod planned
	// for it was bound elsewhere, kube-scheduler chose otherwise (the disagreements below say
	// why) and the node is surplus for consolidation to remove; that is reported, not failed.
	boundAt := map[string]string{}
	for i := range pods.Items {
		boundAt[pods.Items[i].Namespace+"/"+pods.Items[i].Name] = pods.Items[i].Spec.NodeName
	}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if !launched[n.Spec.ProviderID] || workloadPods[n.Name] > 0 {
			continue
		}
		var plannedHere, elsewhere []string
		for _, key := range sortedKeys(planned) {
			if planned[key] == n.Name {
				plannedHere = append(plannedHere, key)
				if boundAt[key] != "" {
					elsewhere = append(elsewhere, key+" -> "+boundAt[key])
				}
			}
		}
		if len(plannedHere) == 0 || len(elsewhere) < len(plannedHere) {
			t.Errorf("launched node %s (%s) runs no workload pod; pods planned for it: %v", n.Name, n.Labels[corev1.LabelInstanceTypeStable], plannedHere)
			continue
		}
		t.Errorf("SURPLUS NODE: launched node %s (%s) runs no workload pod: kube-scheduler bound every pod planned for it elsewhere (%s)",
			n.Name, n.Labels[corev1.LabelInstanceTypeStable], strings.Join(elsewhere, ", "))
	}
	for _, pid := range sortedKeys(launched) {
		if nodeByProvider[pid] == "" {
			t.Errorf("instance %s was launched but never registered a Node", pid)
		}
	}
	// The plan is a bin-packing; kube-scheduler scores nodes (NodeResourcesFit LeastAllocated
	// by default spreads pods across nodes), so left alone it binds a pod to any node that fits.
	// The dovetail.dev/planned taint keeps each new node for its planned pods until they are
	// bound, so at least 95% of them must land where planned (a CronJob may replace a planned
	// pod by a new one meanwhile); each disagreement is reported with the scheduler's reason.
	sort.Strings(disagreements)
	t.Logf("%d of %d planned pods landed where the plan put them; %d disagreements:", plannedSeen-len(disagreements), plannedSeen, len(disagreements))
	if landed := plannedSeen - len(disagreements); plannedSeen == 0 || float64(landed) < 0.95*float64(plannedSeen) {
		t.Errorf("%d of %d planned pods (%.0f%%) landed on their planned node, want at least 95%%", landed, plannedSeen, 100*float64(landed)/float64(max(plannedSeen, 1)))
	}
	for _, d := range disagreements {
		t.Log("  " + d)
	}
	if len(disagreements) > 0 {
		// What the nodes' planned taints followed: each NodeClaim's planned pods and when it
		// registered (the taint keeps the node for those pods until they are bound).
		for _, c := range nodeClaims(ctx, t, env) {
			reg := "not registered"
			for _, cond := range c.Status.Conditions {
				if cond.Type == apisv1.ConditionRegistered && cond.Status == metav1.ConditionTrue {
					reg = "registered " + cond.LastTransitionTime.Format(time.TimeOnly)
				}
			}
			t.Logf("  NodeClaim %s on %s, %s, planned pods: %s", c.Name, c.Status.NodeName, reg, c.Annotations[apisv1.AnnotationPlannedPods])
		}
	}
}

// schedulerWords returns what kube-scheduler recorded on the pod: its FailedScheduling messages
// (why it could not use nodes earlier) and the Scheduled message.
func schedulerWords(ctx context.Context, t *testing.T, env *localdev.Env, p *corev1.Pod) string {
	evs, err := env.Cluster.Kube.CoreV1().Events(p.Namespace).List(ctx, metav1.ListOptions{
		FieldSelector: fields.AndSelectors(fields.OneTermEqualSelector("involvedObject.name", p.Name),
			fields.OneTermEqualSelector("involvedObject.uid", string(p.UID))).String(),
	})
	if err != nil {
		t.Errorf("events of %s/%s: %v", p.Namespace, p.Name, err)
		return "?"
	}
	sort.Slice(evs.Items, func(i, j int) bool { return evs.Items[i].CreationTimestamp.Before(&evs.Items[j].CreationTimestamp) })
	var words []string
	for _, e := range evs.Items {
		if e.Reason == "FailedScheduling" || e.Reason == "Scheduled" {
			words = append(words, e.Reason+": "+e.Message)
		}
	}
	if len(words) == 0 {
		return "(no scheduler event)"
	}
	return strings.Join(words, " | ")
}

// checkAgentRBAC asserts the agent's token (agent/rbac.yaml's ServiceAccount) is held to its
// ClusterRole by the real RBAC authorizer: it may list pods, not secrets, and may not create pods.
func checkAgentRBAC(ctx context.Context, t *testing.T, env *localdev.Env) {
	ak := env.Cluster.AgentKube
	if ak == nil {
		t.Fatal("localdev did not give the agent its own credentials")
	}
	if _, err := ak.CoreV1().Pods("").List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
		t.Errorf("agent list pods: %v, want allowed (rbac.yaml grants pods get/list/watch)", err)
	}
	if _, err := ak.CoreV1().Secrets("").List(ctx, metav1.ListOptions{Limit: 1}); !apierrors.IsForbidden(err) {
		t.Errorf("agent list secrets: %v, want 403 Forbidden (rbac.yaml grants no secrets)", err)
	}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "rbac-probe", Namespace: "default"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}}
	if _, err := ak.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); !apierrors.IsForbidden(err) {
		t.Errorf("agent create pod: %v, want 403 Forbidden", err)
	}
}

// planRecorder keeps every provision decision.
type planRecorder struct {
	mu        sync.Mutex
	decisions []provision.Decision
}

func (r *planRecorder) add(d provision.Decision) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.decisions = append(r.decisions, d)
}

// plannedNodes maps "namespace/name" to the node the latest decision placed the pod on: a
// launched NodeClaim's node (through its instance's provider ID) or an existing node.
func (r *planRecorder) plannedNodes(nodeByProvider map[string]string) map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	claimNode := map[string]string{}
	out := map[string]string{}
	for _, d := range r.decisions {
		for _, l := range d.Launched {
			if l.Instance == nil {
				continue
			}
			node := nodeByProvider[l.Instance.ProviderID]
			claimNode[l.NodeClaim.Name] = node
			for _, p := range l.Pods {
				out[p] = node
			}
		}
		for _, e := range d.Existing {
			node := e.Name
			if e.InFlight {
				node = claimNode[e.Name]
			}
			for _, p := range e.Pods {
				out[p.Namespace+"/"+p.Name] = node
			}
		}
	}
	return out
}

// history says where each decision placed the pod ("namespace/name"): "rev R: new claim C" or
// "rev R: in-flight claim C" or "rev R: node N", in order, for a disagreement's report.
func (r *planRecorder) history(key string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, d := range r.decisions {
		for _, l := range d.Launched {
			if slices.Contains(l.Pods, key) {
				out = append(out, fmt.Sprintf("rev %d: new claim %s", d.Revision, l.NodeClaim.Name))
			}
		}
		for _, e := range d.Existing {
			for _, p := range e.Pods {
				if p.Namespace+"/"+p.Name != key {
					continue
				}
				what := "node"
				if e.InFlight {
					what = "in-flight claim"
				}
				out = append(out, fmt.Sprintf("rev %d: %s %s", d.Revision, what, e.Name))
			}
		}
	}
	return strings.Join(out, "; ")
}

func conditionTime(p *corev1.Pod, typ corev1.PodConditionType) (time.Time, bool) {
	for _, c := range p.Status.Conditions {
		if c.Type == typ && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime.Time, true
		}
	}
	return time.Time{}, false
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// syncBuffer is a log sink shared by the components' goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// filter returns the lines containing any of the needles.
func (s *syncBuffer) filter(needles ...string) string {
	var out []string
	for _, line := range strings.Split(s.String(), "\n") {
		for _, n := range needles {
			if strings.Contains(line, n) {
				out = append(out, line)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}
