//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	"github.com/dovetail-dev/dovetail/charts"
	"github.com/dovetail-dev/dovetail/e2e/realcluster"
	"github.com/dovetail-dev/dovetail/localdev"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/kube"
	"github.com/dovetail-dev/dovetail/shared/queue/nats/natsauth"
	"github.com/dovetail-dev/dovetail/shared/telemetry/prom"
)

// TestHelmChartAgentRunsSeedScenario installs the Helm chart into the real control plane and
// runs the seed scenario with the agent the chart deploys.
//
// What is real: the chart's crds/ (Karpenter's CRDs) are the only CRDs the cluster gets,
// installed before the seed scenario as helm install installs them (created, an existing one
// skipped, then Established; a second install skips all four and changes none); the chart is
// rendered by Helm's own engine (charts.Render: values.yaml coalesced, values.schema.json
// checked, the templates' checks, install order) and every object it renders is applied to
// kube-apiserver (ServiceAccount, ClusterRole and Roles with their bindings, metrics Service,
// PodDisruptionBudget, the agent Deployment); kube-controller-manager makes the Deployment's
// ReplicaSet and pod, and kube-scheduler binds that pod by the chart's tolerations and node
// affinity (a system node, never one Dovetail manages). kwok plays the kubelet, so no container
// runs: in the pod's place the test runs the agent binary (agent/cmd/agent, built here) with
// exactly the container's rendered args, authenticated with a token of the chart's ServiceAccount
// (TokenRequest, what the kubelet mounts) through a kubeconfig, the one flag a pod does not need,
// and probes it on the rendered readiness and liveness paths and port. So the chart's flags, its
// RBAC (enforced by the real RBAC authorizer) and its probes are what the seed scenario runs on.
// The functions are local dev's NATS workers (in process, embedded JetStream at the chart's
// nats.url); the chart's own workers (workers.enabled) are not run here. The other transports
// (sqs, eventgrid, NATS with the bundled server), each with only clusterName and its required
// values, are sent to kube-apiserver as a dry-run install: every object accepted, none run.
func TestHelmChartAgentRunsSeedScenario(t *testing.T) {
	if _, _, _, err := (&realcluster.Options{}).Binaries(); err != nil {
		t.Fatalf("the e2e suite needs the control-plane binaries: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	dir := t.TempDir()
	root, err := realcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	agentBin := filepath.Join(dir, "agent")
	if out, err := exec.Command("go", "build", "-o", agentBin, filepath.Join(root, "agent", "cmd", "agent")).CombinedOutput(); err != nil {
		t.Fatalf("go build the agent: %v\n%s", err, out)
	}
	logs := &syncBuffer{}
	// The CRDs come from the chart (crds/), installed as helm install installs them, before
	// the seed scenario's NodePools and NodeClasses: nothing applies infra/crds here.
	var crdsCreated, crdsSkipped []string
	env, err := localdev.Start(ctx, localdev.Options{
		Cluster: "e2e", ControlPlane: localdev.ControlPlaneReal, BootDelay: bootDelay, CloudProvider: localdev.CloudAWS,
		Out: os.Stdout, Log: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
		ExternalAgent: true, RealControlPlane: realcluster.Options{Dir: dir},
		InstallCRDs: func(ctx context.Context, cp *realcluster.ControlPlane) (err error) {
			crdsCreated, crdsSkipped, err = helmInstallCRDs(ctx, cp)
			return err
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(env.Stop)
	cp := env.ControlPlane
	wantCRDs := []string{"aksnodeclasses.karpenter.azure.com", "ec2nodeclasses.karpenter.k8s.aws", "nodeclaims.karpenter.sh", "nodeoverlays.karpenter.sh", "nodepools.karpenter.sh", "provisioningrequests.autoscaling.x-k8s.io"}
	if !slices.Equal(slices.Sorted(slices.Values(crdsCreated)), wantCRDs) || len(crdsSkipped) != 0 {
		t.Fatalf("the chart's CRDs: created %v, skipped %v; want %v created", crdsCreated, crdsSkipped, wantCRDs)
	}
	t.Logf("installed the chart's CRDs: %v", crdsCreated)

	// helm install e2e charts/dovetail -n dovetail-chart --set clusterName=e2e,nats.url=...: the
	// defaults plus clusterName and transport nats's required values (nats.url, the agent's
	// credentials Secret), and two this machine needs: the CA of the embedded server's private
	// certificate, and a free port for the agent's HTTP server (the agent runs on the host).
	const release, ns = "e2e", "dovetail-chart"
	port := freePort(t)
	ms, err := charts.Render(release, ns, map[string]any{"clusterName": "e2e", "transport": "nats",
		"nats": map[string]any{"url": env.NATSURL, "auth": map[string]any{"agent": map[string]any{"secretName": "e2e-nats-agent"}},
			"tls": map[string]any{"caSecretName": "e2e-nats-ca"}},
		"agent": map[string]any{"httpPort": port}})
	if err != nil {
		t.Fatal(err)
	}
	var all []string
	var deploy appsv1.Deployment
	for _, m := range ms {
		all = append(all, m.YAML)
		if m.Kind == "Deployment" {
			if err := yaml.UnmarshalStrict([]byte(m.YAML), &deploy); err != nil {
				t.Fatal(err)
			}
		}
	}
	manifest := filepath.Join(dir, "chart.yaml")
	if err := os.WriteFile(manifest, []byte(strings.Join(all, "\n---\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := cp.ApplyFiles(ctx, manifest); err != nil {
		t.Fatalf("installing the chart: %v", err)
	}
	t.Logf("installed the chart: %d objects", len(ms))
	podNode := waitAgentPodBound(ctx, t, env, ns, deploy.Spec.Selector.MatchLabels)

	// In the pod's place: the agent binary with the container's args and the ServiceAccount's token.
	ctr := deploy.Spec.Template.Spec.Containers[0]
	kubeconfig := serviceAccountKubeconfig(ctx, t, cp, dir, ns, deploy.Spec.Template.Spec.ServiceAccountName)
	// The Secrets' mount points are the embedded server's role files here (later flags win).
	agent := exec.CommandContext(ctx, agentBin, append(ctr.Args, "--kubeconfig="+kubeconfig,
		"--nats-nkey-seed="+env.NATSFiles.Seeds[natsauth.RoleAgent], "--nats-tls-ca="+env.NATSFiles.CA)...)
	agentLog := &syncBuffer{}
	agent.Stdout, agent.Stderr = agentLog, agentLog
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- agent.Wait() }()
	t.Cleanup(func() {
		_ = agent.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = agent.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("agent output:\n%s", agentLog.String())
		}
	})
	base := "http://127.0.0.1:" + strconv.Itoa(int(ctr.Ports[0].ContainerPort))
	if ctr.ReadinessProbe.HTTPGet.Port.String() != ctr.Ports[0].Name || ctr.LivenessProbe.HTTPGet.Port.String() != ctr.Ports[0].Name {
		t.Fatalf("probes on %s and %s, the container serves %s", ctr.ReadinessProbe.HTTPGet.Port.String(), ctr.LivenessProbe.HTTPGet.Port.String(), ctr.Ports[0].Name)
	}
	waitHTTP200(ctx, t, base+ctr.ReadinessProbe.HTTPGet.Path, exited)
	t.Logf("the chart's agent is ready (%s)", ctr.ReadinessProbe.HTTPGet.Path)

	if err := env.WaitAllBound(ctx); err != nil {
		t.Fatalf("%v\nagent:\n%s", err, agentLog.String())
	}
	if err := env.WaitNodeClaimsReady(ctx); err != nil {
		t.Fatal(err)
	}
	waitHTTP200(ctx, t, base+ctr.LivenessProbe.HTTPGet.Path, exited)

	claims, err := env.Cluster.Dynamic.Resource(kube.NodeClaimGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(claims.Items) == 0 {
		t.Fatal("the seed scenario launched no NodeClaim")
	}
	if created := scrapeSum(t, base+"/metrics", "karpenter_nodeclaims_created_total"); created != float64(len(claims.Items)) {
		t.Errorf("the chart's agent counts %v NodeClaims created, the cluster has %d", created, len(claims.Items))
	}
	t.Logf("seed scenario on the chart's agent: %d NodeClaims Ready, every workload pod bound; the agent pod is on %s", len(claims.Items), podNode)
	checkChartRBAC(ctx, t, cp, ns, deploy.Spec.Template.Spec.ServiceAccountName)

	// A second install into a cluster that has the CRDs (Karpenter's, or an earlier release's)
	// skips every one and changes none, with the seed scenario's objects in place.
	before := crdVersions(ctx, t, cp, wantCRDs)
	created, skipped, err := helmInstallCRDs(ctx, cp)
	if err != nil {
		t.Fatal(err)
	}
	if len(created) != 0 || !slices.Equal(skipped, wantCRDs) {
		t.Errorf("second CRD install: created %v, skipped %v; want all four skipped", created, skipped)
	}
	if after := crdVersions(ctx, t, cp, wantCRDs); !reflect.DeepEqual(after, before) {
		t.Errorf("second CRD install changed the CRDs: resourceVersions %v, were %v", after, before)
	}

	// The other transports with only their required values: kube-apiserver accepts every object
	// (dry run; no SQS, Event Grid or second agent runs here). First a control: the dry run
	// validates, so an object the API server refuses (a negative replica count) fails it.
	bad, err := charts.Render("e2e-dry", "dovetail-dry-run", dryRunTransports(t)[0].values)
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range bad {
		if m.Kind == "Deployment" {
			// The agent runs 2 replicas (leader election), the bundled NATS 1: any count becomes -1.
			bad[i].YAML = replicasRE.ReplaceAllString(m.YAML, "${1}replicas: -1")
		}
	}
	if err := dryRunInstall(ctx, cp, "dovetail-dry-run", bad); err == nil || !strings.Contains(err.Error(), "spec.replicas") {
		t.Errorf("dry run of a Deployment with replicas -1: %v, want kube-apiserver's refusal naming spec.replicas", err)
	}
	for _, tr := range dryRunTransports(t) {
		ms, err := charts.Render("e2e-dry", "dovetail-dry-run", tr.values)
		if err != nil {
			t.Errorf("%s: %v", tr.name, err)
			continue
		}
		if err := dryRunInstall(ctx, cp, "dovetail-dry-run", ms); err != nil {
			t.Errorf("%s: kube-apiserver refuses the chart: %v", tr.name, err)
			continue
		}
		t.Logf("%s with only its required values: kube-apiserver accepts all %d objects (dry run)", tr.name, len(ms))
	}
}

// waitAgentPodBound waits until kube-scheduler has bound the chart's two agent pods and checks
// they landed on nodes Dovetail does not manage (the chart's node affinity); it returns the
// first one's node.
func waitAgentPodBound(ctx context.Context, t *testing.T, env *localdev.Env, ns string, sel map[string]string) string {
	t.Helper()
	var selector []string
	for k, v := range sel {
		selector = append(selector, k+"="+v)
	}
	for {
		pods, err := env.Cluster.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: strings.Join(selector, ",")})
		if err != nil {
			t.Fatal(err)
		}
		// The chart's two replicas (they elect a leader), each bound off Dovetail's nodes.
		bound := 0
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" {
				bound++
			}
		}
		if len(pods.Items) == 2 && bound == 2 {
			for _, p := range pods.Items {
				node, err := env.Cluster.Kube.CoreV1().Nodes().Get(ctx, p.Spec.NodeName, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if _, managed := node.Labels[apisv1.LabelNodePool]; managed {
					t.Errorf("the agent pod is on %s, a node of NodePool %s", node.Name, node.Labels[apisv1.LabelNodePool])
				}
				if p.Spec.PriorityClassName != "system-cluster-critical" || p.Spec.ServiceAccountName != "dovetail-agent" {
					t.Errorf("agent pod: priority class %q, service account %q", p.Spec.PriorityClassName, p.Spec.ServiceAccountName)
				}
			}
			return pods.Items[0].Spec.NodeName
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the chart's agent pod was never bound: %v", pods.Items)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// serviceAccountKubeconfig writes a kubeconfig that authenticates as the ServiceAccount with a
// token from the TokenRequest API (what the kubelet mounts into the pod).
func serviceAccountKubeconfig(ctx context.Context, t *testing.T, cp *realcluster.ControlPlane, dir, ns, sa string) string {
	t.Helper()
	token, err := cp.ServiceAccountToken(ctx, ns, sa, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	rc := cp.TokenConfig(token)
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["e2e"] = &clientcmdapi.Cluster{Server: rc.Host, CertificateAuthorityData: rc.CAData}
	cfg.AuthInfos[sa] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts[sa] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: sa}
	cfg.CurrentContext = sa
	path := filepath.Join(dir, sa+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// checkChartRBAC: the chart's ServiceAccount may list pods and nodes, and may neither read
// Secrets nor create pods (the real RBAC authorizer).
func checkChartRBAC(ctx context.Context, t *testing.T, cp *realcluster.ControlPlane, ns, sa string) {
	t.Helper()
	token, err := cp.ServiceAccountToken(ctx, ns, sa, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := kubernetes.NewForConfig(cp.TokenConfig(token))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kc.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
		t.Errorf("chart's agent list nodes: %v, want allowed", err)
	}
	if _, err := kc.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{Limit: 1}); !apierrors.IsForbidden(err) {
		t.Errorf("chart's agent list secrets: %v, want 403 Forbidden", err)
	}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "rbac-probe", Namespace: "default"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}}
	if _, err := kc.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); !apierrors.IsForbidden(err) {
		t.Errorf("chart's agent create pod: %v, want 403 Forbidden", err)
	}
}

func waitHTTP200(ctx context.Context, t *testing.T, url string, exited <-chan error) {
	t.Helper()
	last := ""
	for {
		resp, err := http.Get(url)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			last = fmt.Sprintf("HTTP %d %s", resp.StatusCode, b)
		} else {
			last = err.Error()
		}
		select {
		case err := <-exited:
			t.Fatalf("the agent exited (%v) before %s answered 200 (last: %s)", err, url, last)
		case <-ctx.Done():
			t.Fatalf("%s: %s", url, last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// scrapeSum is the sum of a counter's series on a Prometheus text endpoint.
func scrapeSum(t *testing.T, url, name string) float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	series, err := prom.ParseText(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	sum, found := 0.0, false
	for k, v := range series {
		if k == name || strings.HasPrefix(k, name+"{") {
			sum, found = sum+v, true
		}
	}
	if !found {
		t.Fatalf("%s: no %s", url, name)
	}
	return sum
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// replicasRE matches a Deployment's spec.replicas line, keeping its indentation.
var replicasRE = regexp.MustCompile(`(?m)^(\s*)replicas: \d+$`)
