package charts

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"k8s.io/apimachinery/pkg/labels"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
	"github.com/spf13/pflag"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/dovetail-dev/dovetail/functions/lifecycle"
	"github.com/dovetail-dev/dovetail/shared/queue/nats/natsauth"
	"github.com/dovetail-dev/dovetail/shared/runtime"
	"github.com/dovetail-dev/dovetail/shared/runtime/cloudflags"
)

const testNamespace = "dovetail-system"

// rolePublicKeys are one nkey user public key per NATS role (fresh keys: public keys are not
// secret, and the chart is given nothing else).
var rolePublicKeys = func() map[natsauth.Role]string {
	keys := map[natsauth.Role]string{}
	for _, role := range natsauth.Roles {
		kp, err := nkeys.CreateUser()
		if err != nil {
			panic(err)
		}
		keys[role], _ = kp.PublicKey()
	}
	return keys
}()

// The values of each deployment shape docs/install.md documents.
var (
	natsValues = map[string]any{"clusterName": "prod-eu", "transport": "nats",
		"nats": map[string]any{"server": map[string]any{"enabled": true, "clientCIDRs": []any{"10.0.0.0/16"}},
			"auth": map[string]any{
				"agent":           map[string]any{"secretName": "dovetail-nats-agent", "publicKey": rolePublicKeys[natsauth.RoleAgent]},
				"function":        map[string]any{"secretName": "dovetail-nats-function", "publicKey": rolePublicKeys[natsauth.RoleFunction]},
				"scheduledEvents": map[string]any{"secretName": "dovetail-nats-scheduled-events", "publicKey": rolePublicKeys[natsauth.RoleScheduledEvents]},
				"audit":           map[string]any{"publicKey": rolePublicKeys[natsauth.RoleAudit]}},
			"tls": map[string]any{"secretName": "dovetail-nats-tls"}},
		"workers":         map[string]any{"enabled": true, "cloud": "azure", "region": "westeurope"},
		"scheduledEvents": map[string]any{"enabled": true}, "serviceMonitor": map[string]any{"enabled": true},
		"nodeClassKind": "AKSNodeClass"}
	sqsValues = map[string]any{"clusterName": "prod", "transport": "sqs",
		"sqs": map[string]any{"eventQueueURLs": map[string]any{
			"provision":    "https://sqs.us-east-1.amazonaws.com/111122223333/prod-provision.fifo",
			"consolidate":  "https://sqs.us-east-1.amazonaws.com/111122223333/prod-consolidate.fifo",
			"drift":        "https://sqs.us-east-1.amazonaws.com/111122223333/prod-drift.fifo",
			"interruption": "https://sqs.us-east-1.amazonaws.com/111122223333/prod-interruption.fifo",
			"lifecycle":    "https://sqs.us-east-1.amazonaws.com/111122223333/prod-lifecycle.fifo"},
			"commandQueueURL": "https://sqs.us-east-1.amazonaws.com/111122223333/prod-commands.fifo",
			"commandDLQURL":   "https://sqs.us-east-1.amazonaws.com/111122223333/prod-commands-dlq.fifo",
			"blobBucket":      "prod-dovetail-claims", "region": "us-east-1"},
		"identity": map[string]any{"type": "irsa", "irsa": map[string]any{"roleARN": "arn:aws:iam::111122223333:role/prod-dovetail-agent"}}}
	eventGridValues = map[string]any{"clusterName": "aks-prod", "transport": "eventgrid", "nodeClassKind": "AKSNodeClass",
		"eventgrid": map[string]any{"topicEndpoint": "https://dt-events.westeurope-1.eventgrid.azure.net/api/events",
			"namespaceEndpoint": "https://dt-ns.westeurope-1.eventgrid.azure.net", "storageAccountURL": "https://dtclaims.blob.core.windows.net",
			"blobContainer": "claims", "deadLetterContainer": "deadletters"},
		"identity": map[string]any{"type": "azureWorkloadIdentity",
			"azureWorkloadIdentity": map[string]any{"clientID": "6f1a2b3c-4d5e-4f60-8a7b-9c0d1e2f3a4b"}}}
)

// helm lint (Helm's own linter: Chart.yaml, values against the schema, every template rendered
// and parsed as Kubernetes YAML) passes for each shape with no warning.
func TestHelmLint(t *testing.T) {
	for name, vals := range map[string]map[string]any{"nats": natsValues, "sqs": sqsValues, "eventgrid": eventGridValues} {
		l := lint.AllWithKubeVersion(Dir, vals, testNamespace, &KubeVersion)
		for _, m := range l.Messages {
			if m.Severity > support.InfoSev {
				t.Errorf("%s: helm lint: %s", name, m)
			}
		}
	}
	// With the defaults, lint passes (Helm's lint mode logs a template's fail instead of failing,
	// so charts with required values lint) and the install fails on the one value nobody can
	// default, naming it and where it comes from.
	l := lint.AllWithKubeVersion(Dir, nil, testNamespace, &KubeVersion)
	if l.HighestSeverity > support.InfoSev {
		t.Errorf("helm lint with the defaults: %v", l.Messages)
	}
	if _, err := Render("dovetail", testNamespace, nil); err == nil || !strings.Contains(err.Error(), "clusterName: required") {
		t.Errorf("install with the defaults: %v, want an error naming clusterName", err)
	}
}

// rendered decodes every manifest strictly into its Kubernetes type (an unknown or misspelled
// field fails), keyed "Kind/name" (namespaced: "Kind/namespace/name").
type rendered map[string]any

func render(t *testing.T, vals map[string]any) rendered {
	t.Helper()
	ms, err := Render("dovetail", testNamespace, vals)
	if err != nil {
		t.Fatal(err)
	}
	out := rendered{}
	for _, m := range ms {
		var obj any
		switch m.Kind {
		case "Deployment":
			obj = &appsv1.Deployment{}
		case "StatefulSet":
			obj = &appsv1.StatefulSet{}
		case "DaemonSet":
			obj = &appsv1.DaemonSet{}
		case "Service":
			obj = &corev1.Service{}
		case "ServiceAccount":
			obj = &corev1.ServiceAccount{}
		case "ConfigMap":
			obj = &corev1.ConfigMap{}
		case "ClusterRole":
			obj = &rbacv1.ClusterRole{}
		case "ClusterRoleBinding":
			obj = &rbacv1.ClusterRoleBinding{}
		case "Role":
			obj = &rbacv1.Role{}
		case "RoleBinding":
			obj = &rbacv1.RoleBinding{}
		case "PodDisruptionBudget":
			obj = &policyv1.PodDisruptionBudget{}
		case "NetworkPolicy":
			obj = &networkingv1.NetworkPolicy{}
		case "ServiceMonitor": // no Go types are served for the Prometheus Operator's CRDs
			obj = &unstructured.Unstructured{}
		default:
			t.Fatalf("%s: unexpected kind %s", m.Template, m.Kind)
		}
		if u, ok := obj.(*unstructured.Unstructured); ok {
			if err := yaml.Unmarshal([]byte(m.YAML), &u.Object); err != nil {
				t.Fatalf("%s: %v", m.Template, err)
			}
		} else if err := yaml.UnmarshalStrict([]byte(m.YAML), obj); err != nil {
			t.Fatalf("%s %s/%s: %v\n%s", m.Template, m.Kind, m.Name, err, m.YAML)
		}
		ns := ""
		if mo, ok := obj.(interface{ GetNamespace() string }); ok {
			ns = mo.GetNamespace()
		}
		key := m.Kind + "/" + m.Name
		if ns != "" {
			key = m.Kind + "/" + ns + "/" + m.Name
		}
		if _, dup := out[key]; dup {
			t.Fatalf("%s rendered twice", key)
		}
		out[key] = obj
	}
	return out
}

func get[T any](t *testing.T, r rendered, key string) T {
	t.Helper()
	o, ok := r[key].(T)
	if !ok {
		t.Fatalf("%s: not rendered (have %v)", key, r.keys())
	}
	return o
}

func (r rendered) keys() []string {
	var ks []string
	for k := range r {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func agentContainer(t *testing.T, r rendered) corev1.Container {
	t.Helper()
	d := get[*appsv1.Deployment](t, r, "Deployment/"+testNamespace+"/dovetail-agent")
	if len(d.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("agent pod: %d containers", len(d.Spec.Template.Spec.Containers))
	}
	return d.Spec.Template.Spec.Containers[0]
}

// The agent's flags for each transport, as the hand-written lists of what infra/aws and
// infra/azure output (agent/cmd/agent's tests parse the same args with the agent's own flags).
func TestAgentArgsPerTransport(t *testing.T) {
	common := func(cluster, kind, transport string) []string {
		return []string{"--cluster=" + cluster, "--namespace=" + testNamespace, "--node-class-kind=" + kind, "--transport=" + transport,
			"--http-addr=:8080", "--kube-api-qps=200", "--kube-api-burst=300"}
	}
	cases := []struct {
		name string
		vals map[string]any
		want []string
	}{
		{"nats", natsValues, append(common("prod-eu", "AKSNodeClass", "nats"),
			"--nats-url=nats://dovetail-nats.dovetail-system.svc:4222", "--ensure-stream=true",
			"--nats-nkey-seed=/etc/dovetail/nats/credentials/nkey", "--nats-tls-ca=/etc/dovetail/nats/tls/ca.crt")},
		{"sqs", sqsValues, append(common("prod", "EC2NodeClass", "sqs"),
			"--event-queue-url=https://sqs.us-east-1.amazonaws.com/111122223333/prod-provision.fifo",
			"--event-queue-url=https://sqs.us-east-1.amazonaws.com/111122223333/prod-consolidate.fifo",
			"--event-queue-url=https://sqs.us-east-1.amazonaws.com/111122223333/prod-drift.fifo",
			"--event-queue-url=https://sqs.us-east-1.amazonaws.com/111122223333/prod-interruption.fifo",
			"--event-queue-url=https://sqs.us-east-1.amazonaws.com/111122223333/prod-lifecycle.fifo",
			"--command-queue-url=https://sqs.us-east-1.amazonaws.com/111122223333/prod-commands.fifo",
			"--command-dlq-url=https://sqs.us-east-1.amazonaws.com/111122223333/prod-commands-dlq.fifo",
			"--blob-bucket=prod-dovetail-claims")},
		{"eventgrid", eventGridValues, append(common("aks-prod", "AKSNodeClass", "eventgrid"),
			"--eventgrid-topic-endpoint=https://dt-events.westeurope-1.eventgrid.azure.net/api/events",
			"--eventgrid-namespace-endpoint=https://dt-ns.westeurope-1.eventgrid.azure.net",
			"--storage-account-url=https://dtclaims.blob.core.windows.net", "--blob-container=claims", "--dead-letter-container=deadletters")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctr := agentContainer(t, render(t, c.vals))
			if !reflect.DeepEqual(ctr.Args, c.want) {
				t.Errorf("args\n got %q\nwant %q", ctr.Args, c.want)
			}
			if c.name == "sqs" && (len(ctr.Env) != 1 || ctr.Env[0] != (corev1.EnvVar{Name: "AWS_REGION", Value: "us-east-1"})) {
				t.Errorf("env %v, want AWS_REGION=us-east-1", ctr.Env)
			}
		})
	}
}

// Each identity puts exactly its annotation on the ServiceAccount (EKS Pod Identity: none, the
// association is on the AWS side) and Azure Workload Identity labels the pod for the webhook.
func TestServiceAccountIdentity(t *testing.T) {
	withIdentity := func(id map[string]any) map[string]any {
		v := clone(sqsValues)
		v["identity"] = id
		return v
	}
	cases := []struct {
		name      string
		vals      map[string]any
		want      map[string]string
		podLabels bool
	}{
		{"irsa", sqsValues, map[string]string{"eks.amazonaws.com/role-arn": "arn:aws:iam::111122223333:role/prod-dovetail-agent"}, false},
		{"podIdentity", withIdentity(map[string]any{"type": "podIdentity"}), nil, false},
		{"none", withIdentity(map[string]any{"type": "none"}), nil, false},
		{"azureWorkloadIdentity", eventGridValues, map[string]string{"azure.workload.identity/client-id": "6f1a2b3c-4d5e-4f60-8a7b-9c0d1e2f3a4b"}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := render(t, c.vals)
			sa := get[*corev1.ServiceAccount](t, r, "ServiceAccount/"+testNamespace+"/dovetail-agent")
			if len(sa.Annotations) != len(c.want) || (len(c.want) > 0 && !reflect.DeepEqual(sa.Annotations, c.want)) {
				t.Errorf("annotations %v, want %v", sa.Annotations, c.want)
			}
			d := get[*appsv1.Deployment](t, r, "Deployment/"+testNamespace+"/dovetail-agent")
			if got := d.Spec.Template.Labels["azure.workload.identity/use"] == "true"; got != c.podLabels {
				t.Errorf("pod label azure.workload.identity/use: %v, want %v", got, c.podLabels)
			}
			if d.Spec.Template.Spec.ServiceAccountName != "dovetail-agent" {
				t.Errorf("pod service account %q", d.Spec.Template.Spec.ServiceAccountName)
			}
		})
	}
}

// The agent's PodDisruptionBudget: with the default two replicas a drain may evict one at a time
// (2 - maxUnavailable 1 = 1 left to hold or take the Lease); it selects the agent's pods, and
// only those; a percentage is kept as written (Kubernetes rounds it up: 50% of 2 is 1); disabled,
// none is rendered.
func TestAgentPodDisruptionBudget(t *testing.T) {
	r := render(t, sqsValues)
	d := get[*appsv1.Deployment](t, r, "Deployment/"+testNamespace+"/dovetail-agent")
	pdb := get[*policyv1.PodDisruptionBudget](t, r, "PodDisruptionBudget/"+testNamespace+"/dovetail-agent")
	if pdb.Spec.MinAvailable != nil || pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 || *d.Spec.Replicas != 2 {
		t.Fatalf("pdb %+v with %d replicas, want maxUnavailable 1 of 2", pdb.Spec, *d.Spec.Replicas)
	}
	sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	if !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("pdb selector %v does not select the agent's pods %v", sel, d.Spec.Template.Labels)
	}
	for k, obj := range r {
		if w, ok := obj.(*appsv1.Deployment); ok && k != "Deployment/"+testNamespace+"/dovetail-agent" && sel.Matches(labels.Set(w.Spec.Template.Labels)) {
			t.Errorf("the agent's pdb also selects the pods of %s", k)
		}
	}

	v := clone(sqsValues)
	v["podDisruptionBudget"] = map[string]any{"maxUnavailable": "50%"}
	pdb = get[*policyv1.PodDisruptionBudget](t, render(t, v), "PodDisruptionBudget/"+testNamespace+"/dovetail-agent")
	if pdb.Spec.MaxUnavailable.String() != "50%" {
		t.Errorf("maxUnavailable %s, want 50%% as written", pdb.Spec.MaxUnavailable.String())
	}
	v["podDisruptionBudget"] = map[string]any{"enabled": false}
	for k := range render(t, v) {
		if strings.HasPrefix(k, "PodDisruptionBudget/") {
			t.Errorf("%s rendered with podDisruptionBudget.enabled false", k)
		}
	}
}

// Liveness on /healthz, readiness on /readyz, both on the port the agent's --http-addr serves,
// which the metrics Service targets; two replicas rolled one at a time; hardened pod.
func TestAgentPodSpec(t *testing.T) {
	r := render(t, sqsValues)
	d := get[*appsv1.Deployment](t, r, "Deployment/"+testNamespace+"/dovetail-agent")
	ctr := agentContainer(t, r)
	if len(ctr.Ports) != 1 || ctr.Ports[0].ContainerPort != 8080 || ctr.Ports[0].Name != "http-metrics" {
		t.Fatalf("ports %v", ctr.Ports)
	}
	for probe, want := range map[*corev1.Probe]string{ctr.LivenessProbe: "/healthz", ctr.ReadinessProbe: "/readyz"} {
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != want || probe.HTTPGet.Port.String() != "http-metrics" {
			t.Errorf("probe %+v, want GET %s on http-metrics", probe, want)
		}
	}
	// Two replicas electing a leader, rolled one at a time, preferably on different nodes.
	if *d.Spec.Replicas != 2 || d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType ||
		d.Spec.Strategy.RollingUpdate.MaxUnavailable.IntValue() != 1 || d.Spec.Strategy.RollingUpdate.MaxSurge.IntValue() != 0 {
		t.Errorf("replicas %d strategy %+v, want 2, RollingUpdate maxUnavailable 1 maxSurge 0", *d.Spec.Replicas, d.Spec.Strategy)
	}
	aff := d.Spec.Template.Spec.Affinity
	if aff == nil || aff.PodAntiAffinity == nil || len(aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) != 1 ||
		aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm.TopologyKey != corev1.LabelHostname ||
		aff.NodeAffinity == nil {
		t.Errorf("affinity %+v, want the node affinity and a preferred pod anti-affinity on %s", aff, corev1.LabelHostname)
	} else if sel := aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm.LabelSelector; sel == nil ||
		!labels.SelectorFromSet(sel.MatchLabels).Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("anti-affinity selector %+v does not select the agent's own pods %v", sel, d.Spec.Template.Labels)
	}

	sc := ctr.SecurityContext
	if sc == nil || !*sc.ReadOnlyRootFilesystem || *sc.AllowPrivilegeEscalation || !*sc.RunAsNonRoot || len(sc.Capabilities.Drop) != 1 {
		t.Errorf("container security context %+v", sc)
	}
	if d.Spec.Template.Spec.PriorityClassName != "system-cluster-critical" {
		t.Errorf("priorityClassName %q", d.Spec.Template.Spec.PriorityClassName)
	}
	if ctr.Resources.Requests.Cpu().MilliValue() != 200 || ctr.Resources.Limits.Memory().Value() != 1<<30 {
		t.Errorf("resources %v", ctr.Resources)
	}
	na := d.Spec.Template.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions[0]
	if na.Key != "karpenter.sh/nodepool" || na.Operator != corev1.NodeSelectorOpDoesNotExist {
		t.Errorf("node affinity %v, want off Dovetail's own nodes", na)
	}
	svc := get[*corev1.Service](t, r, "Service/"+testNamespace+"/dovetail-agent")
	if !reflect.DeepEqual(svc.Spec.Selector, d.Spec.Selector.MatchLabels) || svc.Spec.Ports[0].TargetPort.String() != "http-metrics" {
		t.Errorf("service %v does not reach the agent's %v", svc.Spec, d.Spec.Selector.MatchLabels)
	}
	pdb := get[*policyv1.PodDisruptionBudget](t, r, "PodDisruptionBudget/"+testNamespace+"/dovetail-agent")
	if !reflect.DeepEqual(pdb.Spec.Selector.MatchLabels, d.Spec.Selector.MatchLabels) || pdb.Spec.MaxUnavailable.IntValue() != 1 {
		t.Errorf("pdb %v", pdb.Spec)
	}
	if _, ok := r["ServiceMonitor/"+testNamespace+"/dovetail"]; ok {
		t.Error("ServiceMonitor rendered with serviceMonitor.enabled false")
	}
	for k := range r {
		if strings.HasPrefix(k, "StatefulSet/") || strings.HasPrefix(k, "DaemonSet/") || strings.Contains(k, "provision") {
			t.Errorf("%s rendered with the sqs shape (no NATS server, workers or Scheduled Events)", k)
		}
	}
}

// The chart's RBAC is agent/rbac.yaml's: the same ClusterRole rules, the same Roles in the same
// namespaces (rbac.yaml's dovetail-system is the release namespace), all bound to the agent's
// ServiceAccount and nothing else.
func TestRBACIsAgentRBAC(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "agent", "rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want := grants(t, splitYAML(t, raw), "dovetail-system", "dovetail-agent")
	for _, ns := range []string{"dovetail-system", "karpenter"} {
		ms, err := Render("dovetail", ns, sqsValues)
		if err != nil {
			t.Fatal(err)
		}
		var docs [][]byte
		for _, m := range ms {
			docs = append(docs, []byte(m.YAML))
		}
		got := grants(t, docs, ns, "dovetail-agent")
		if !reflect.DeepEqual(got, want) {
			t.Errorf("namespace %s: the chart grants\n%s\nagent/rbac.yaml grants\n%s\n(update charts/dovetail/templates/rbac.yaml with agent/rbac.yaml)",
				ns, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}

// grants lists every rule bound to the service account (namespace/name) as
// "<scope> <groups> <resources> <names> <verbs>", the release namespace written "$NS", sorted.
func grants(t *testing.T, docs [][]byte, ns, sa string) []string {
	t.Helper()
	roles := map[string][]rbacv1.PolicyRule{}
	var bound []string
	for _, doc := range docs {
		var head struct {
			Kind     string `json:"kind"`
			Metadata struct{ Name, Namespace string }
		}
		if err := yaml.Unmarshal(doc, &head); err != nil {
			t.Fatal(err)
		}
		scope := strings.ReplaceAll(head.Metadata.Namespace, ns, "$NS")
		switch head.Kind {
		case "ClusterRole", "Role":
			var r rbacv1.ClusterRole
			if err := yaml.Unmarshal(doc, &r); err != nil {
				t.Fatal(err)
			}
			roles[head.Kind+"/"+head.Metadata.Namespace+"/"+head.Metadata.Name] = r.Rules
		case "ClusterRoleBinding", "RoleBinding":
			var b rbacv1.RoleBinding
			if err := yaml.Unmarshal(doc, &b); err != nil {
				t.Fatal(err)
			}
			for _, s := range b.Subjects {
				if s.Kind != "ServiceAccount" || s.Namespace != ns || s.Name != sa {
					t.Errorf("%s %s binds %v, want only %s/%s", head.Kind, head.Metadata.Name, s, ns, sa)
				}
			}
			roleNS := head.Metadata.Namespace
			if b.RoleRef.Kind == "ClusterRole" {
				roleNS = ""
			}
			bound = append(bound, scope+"|"+b.RoleRef.Kind+"/"+roleNS+"/"+b.RoleRef.Name)
		}
	}
	var out []string
	for _, b := range bound {
		scope, ref, _ := strings.Cut(b, "|")
		rules, ok := roles[ref]
		if !ok {
			t.Errorf("binding to %s, which is not defined", ref)
		}
		for _, r := range rules {
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					verbs := append([]string(nil), r.Verbs...)
					sort.Strings(verbs)
					out = append(out, fmt.Sprintf("%-16s %-20s %-26s %v %v", "["+scope+"]", g, res, r.ResourceNames, verbs))
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

func splitYAML(t *testing.T, raw []byte) [][]byte {
	t.Helper()
	dec := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
	var docs [][]byte
	for {
		d, err := dec.Read()
		if errors.Is(err, io.EOF) {
			return docs
		} else if err != nil {
			t.Fatal(err)
		}
		if len(bytes.TrimSpace(d)) > 0 {
			docs = append(docs, d)
		}
	}
}

// The NATS shape: the bundled server's rendered nats.conf is one nats-server itself accepts with
// JetStream on the PersistentVolume; the workers run each function's real flags; the Scheduled
// Events DaemonSet and the ServiceMonitor reach what they should.
func TestNATSShape(t *testing.T) {
	r := render(t, natsValues)
	cm := get[*corev1.ConfigMap](t, r, "ConfigMap/"+testNamespace+"/dovetail-nats")
	// The server reads its certificate at start: the Secret's mount point is replaced by a
	// directory holding a throwaway pair.
	dir := t.TempDir()
	writeTLSPair(t, dir)
	conf := filepath.Join(dir, "nats.conf")
	if err := os.WriteFile(conf, []byte(strings.ReplaceAll(cm.Data["nats.conf"], "/etc/nats-tls/", dir+"/")), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("POD_NAME", "dovetail-nats-0")
	opts, err := server.ProcessConfigFile(conf)
	if err != nil {
		t.Fatalf("nats-server refuses the chart's config: %v\n%s", err, cm.Data["nats.conf"])
	}
	if !opts.JetStream || opts.StoreDir != "/data/jetstream" || opts.JetStreamMaxStore != 8<<30 || opts.ServerName != "dovetail-nats-0" || opts.Port != 4222 {
		t.Errorf("nats options: jetstream %v store %s max %d name %s port %d", opts.JetStream, opts.StoreDir, opts.JetStreamMaxStore, opts.ServerName, opts.Port)
	}
	if opts.TLSConfig == nil || len(opts.TLSConfig.Certificates) != 1 {
		t.Errorf("the server does not require TLS: %v", opts.TLSConfig)
	}
	checkServerPermissions(t, opts, "prod-eu")
	ss := get[*appsv1.StatefulSet](t, r, "StatefulSet/"+testNamespace+"/dovetail-nats")
	if v := ss.Spec.Template.Spec.Volumes; len(v) != 2 || v[1].Secret == nil || v[1].Secret.SecretName != "dovetail-nats-tls" {
		t.Errorf("the server's TLS Secret is not mounted: %v", v)
	}
	if m := ss.Spec.Template.Spec.Containers[0].VolumeMounts; len(m) != 3 || m[1].Name != "data" || m[1].MountPath != "/data" ||
		m[2].MountPath != "/etc/nats-tls" || !m[2].ReadOnly ||
		ss.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests.Storage().String() != "10Gi" {
		t.Errorf("JetStream's store is not on the claim: %v %v", m, ss.Spec.VolumeClaimTemplates)
	}
	svc := get[*corev1.Service](t, r, "Service/"+testNamespace+"/dovetail-nats")
	if svc.Spec.Ports[0].Port != 4222 || !reflect.DeepEqual(svc.Spec.Selector, ss.Spec.Selector.MatchLabels) {
		t.Errorf("nats service %v", svc.Spec)
	}
	np := get[*networkingv1.NetworkPolicy](t, r, "NetworkPolicy/"+testNamespace+"/dovetail-nats")
	from := np.Spec.Ingress[0].From
	if len(from) != 2 || from[0].PodSelector.MatchLabels["app.kubernetes.io/part-of"] != "dovetail" || from[1].IPBlock.CIDR != "10.0.0.0/16" {
		t.Errorf("network policy clients %v", from)
	}

	for _, fn := range []string{"provision", "lifecycle", "consolidate", "drift", "interruption"} {
		d := get[*appsv1.Deployment](t, r, "Deployment/"+testNamespace+"/dovetail-"+fn)
		ctr := d.Spec.Template.Spec.Containers[0]
		if !reflect.DeepEqual(ctr.Command, []string{"/" + fn}) {
			t.Errorf("%s: command %v", fn, ctr.Command)
		}
		// The worker's own flag set (shared/runtime and cloudflags) parses the rendered args.
		var co cloudflags.Options
		var lf lifecycle.Flags
		register := co.Register
		if fn == lifecycle.Component {
			register = func(fs *pflag.FlagSet) { co.Register(fs); lf.Register(fs) }
		}
		cmd := runtime.Command(runtime.Function{Name: fn, Flags: register})
		if err := cmd.ParseFlags(ctr.Args); err != nil {
			t.Fatalf("%s: %v: args %q", fn, err, ctr.Args)
		}
		if fn == lifecycle.Component && (!cmd.Flags().Changed("node-repair") || !lf.NodeRepair) {
			t.Errorf("lifecycle: args %q, want --node-repair=true (workers.functions.lifecycle.nodeRepair's default)", ctr.Args)
		}
		checkNATSClient(t, fn, d.Spec.Template.Spec, "dovetail-nats-function", cmd.Flags().Lookup)
		if co.Cloud != "azure" || co.Region != "westeurope" || cmd.Flags().Lookup("nats-url").Value.String() != "nats://dovetail-nats.dovetail-system.svc:4222" ||
			cmd.Flags().Lookup("cluster").Value.String() != "prod-eu" || cmd.Flags().Lookup("http-addr").Value.String() != ":8080" {
			t.Errorf("%s: args %q", fn, ctr.Args)
		}
		if d.Spec.Template.Spec.AutomountServiceAccountToken == nil || *d.Spec.Template.Spec.AutomountServiceAccountToken {
			t.Errorf("%s: mounts an API token it never uses", fn)
		}
		if ctr.ReadinessProbe.HTTPGet.Path != "/readyz" || ctr.LivenessProbe.HTTPGet.Path != "/healthz" {
			t.Errorf("%s: probes %v %v", fn, ctr.ReadinessProbe, ctr.LivenessProbe)
		}
		if s := get[*corev1.Service](t, r, "Service/"+testNamespace+"/dovetail-"+fn); s.Labels["dovetail.dev/metrics"] != "true" {
			t.Errorf("%s: metrics service labels %v", fn, s.Labels)
		}
	}

	ds := get[*appsv1.DaemonSet](t, r, "DaemonSet/"+testNamespace+"/dovetail-scheduled-events")
	pod := ds.Spec.Template.Spec
	want := []string{"--cluster=prod-eu", "--transport=nats", "--nats-url=nats://dovetail-nats.dovetail-system.svc:4222",
		"--nats-nkey-seed=/etc/dovetail/nats/credentials/nkey", "--nats-tls-ca=/etc/dovetail/nats/tls/ca.crt", "--interval=1s"}
	checkNATSClient(t, "scheduled-events", pod, "dovetail-nats-scheduled-events", nil)
	checkNATSClient(t, "agent", get[*appsv1.Deployment](t, r, "Deployment/"+testNamespace+"/dovetail-agent").Spec.Template.Spec, "dovetail-nats-agent", nil)
	if !pod.HostNetwork || !reflect.DeepEqual(pod.Containers[0].Args, want) || pod.Containers[0].Command[0] != "/scheduled-events" ||
		pod.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions[0].Operator != corev1.NodeSelectorOpExists {
		t.Errorf("scheduled events pod: host network %v, args %v", pod.HostNetwork, pod.Containers[0].Args)
	}

	sm := get[*unstructured.Unstructured](t, r, "ServiceMonitor/"+testNamespace+"/dovetail")
	sel, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if sm.GetAPIVersion() != "monitoring.coreos.com/v1" || len(eps) != 1 || eps[0].(map[string]any)["port"] != "http-metrics" {
		t.Errorf("service monitor %v", sm.Object)
	}
	scraped := 0
	for _, k := range r.keys() {
		if s, ok := r[k].(*corev1.Service); ok && matches(sel, s.Labels) {
			scraped++
		}
	}
	if scraped != 6 {
		t.Errorf("the ServiceMonitor selects %d Services, want 6 (the agent and five workers)", scraped)
	}
}

// workers.functions.lifecycle.nodeRepair: false reaches the lifecycle worker as
// --node-repair=false, and only the lifecycle worker takes the flag.
func TestWorkersNodeRepairOff(t *testing.T) {
	v := clone(natsValues)
	v["workers"].(map[string]any)["functions"] = map[string]any{"lifecycle": map[string]any{"nodeRepair": false}}
	r := render(t, v)
	for _, fn := range []string{"provision", "lifecycle", "consolidate", "drift", "interruption"} {
		args := get[*appsv1.Deployment](t, r, "Deployment/"+testNamespace+"/dovetail-"+fn).Spec.Template.Spec.Containers[0].Args
		has := slices.Contains(args, "--node-repair=false")
		if has != (fn == lifecycle.Component) || slices.Contains(args, "--node-repair=true") {
			t.Errorf("%s: args %q", fn, args)
		}
	}
}

func matches(sel, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// Bad values fail the install with the field and the reason.
func TestBadValuesNameTheField(t *testing.T) {
	cases := []struct {
		name string
		set  func(v map[string]any)
		want []string
	}{
		{"cluster name", func(v map[string]any) { v["clusterName"] = "Prod_EU" }, []string{"clusterName", "does not match pattern"}},
		{"transport", func(v map[string]any) { v["transport"] = "kafka" }, []string{"transport", "nats", "sqs", "eventgrid"}},
		{"cluster name missing", func(v map[string]any) { delete(v, "clusterName") }, []string{"clusterName: required", "cluster_name", "--set clusterName="}},
		{"sqs without queues", func(v map[string]any) { v["sqs"] = map[string]any{"region": "us-east-1"} },
			[]string{"sqs.eventQueueURLs.provision: required with transport: sqs", "event_queue_urls.provision"}},
		{"sqs queue of one function missing", func(v map[string]any) { delete(v["sqs"].(map[string]any)["eventQueueURLs"].(map[string]any), "drift") },
			[]string{"sqs.eventQueueURLs.drift: required with transport: sqs", "event_queue_urls.drift"}},
		{"sqs queue of one function empty", func(v map[string]any) {
			v["sqs"].(map[string]any)["eventQueueURLs"].(map[string]any)["lifecycle"] = ""
		}, []string{"sqs.eventQueueURLs.lifecycle: required"}},
		{"sqs queues as a list", func(v map[string]any) {
			v["sqs"].(map[string]any)["eventQueueURLs"] = []any{"https://sqs.us-east-1.amazonaws.com/111122223333/prod-provision.fifo"}
		}, []string{"sqs.eventQueueURLs: a map from function name (provision, consolidate, drift, interruption, lifecycle)", "not a list", "terraform output -json event_queue_urls"}},
		{"sqs queues null", func(v map[string]any) { v["sqs"].(map[string]any)["eventQueueURLs"] = nil },
			[]string{"sqs.eventQueueURLs: a map from function name", "not a null"}},
		{"sqs queues a string", func(v map[string]any) {
			v["sqs"].(map[string]any)["eventQueueURLs"] = "https://sqs.us-east-1.amazonaws.com/111122223333/prod-provision.fifo"
		}, []string{"sqs.eventQueueURLs: a map from function name", "not a string"}},
		{"sqs queue of an unknown function", func(v map[string]any) {
			v["sqs"].(map[string]any)["eventQueueURLs"].(map[string]any)["provisioner"] = "https://sqs.us-east-1.amazonaws.com/111122223333/x.fifo"
		}, []string{"sqs/eventQueueURLs", "provisioner", "not allowed"}},
		{"sqs queue not a URL", func(v map[string]any) {
			v["sqs"].(map[string]any)["eventQueueURLs"].(map[string]any)["drift"] = "prod-drift.fifo"
		}, []string{"sqs/eventQueueURLs/drift", "does not match pattern"}},
		{"sqs without command queue", func(v map[string]any) { delete(v["sqs"].(map[string]any), "commandQueueURL") },
			[]string{"sqs.commandQueueURL: required with transport: sqs", "command_queue_url"}},
		{"eventgrid without topic", func(v map[string]any) { v["transport"] = "eventgrid" },
			[]string{"eventgrid.topicEndpoint: required with transport: eventgrid", "agent_flags"}},
		{"eventgrid without namespace", func(v map[string]any) {
			v["transport"], v["eventgrid"] = "eventgrid", map[string]any{"topicEndpoint": "https://t.westeurope-1.eventgrid.azure.net/api/events"}
		}, []string{"eventgrid.namespaceEndpoint: required with transport: eventgrid"}},
		{"irsa without role", func(v map[string]any) { v["identity"] = map[string]any{"type": "irsa"} },
			[]string{"identity.irsa.roleARN: required with identity.type: irsa"}},
		{"workload identity without client id", func(v map[string]any) {
			v["transport"], v["identity"] = "eventgrid", map[string]any{"type": "azureWorkloadIdentity"}
			v["eventgrid"] = map[string]any{"topicEndpoint": "https://t.westeurope-1.eventgrid.azure.net/api/events",
				"namespaceEndpoint": "https://n.westeurope-1.eventgrid.azure.net"}
		}, []string{"identity.azureWorkloadIdentity.clientID: required with identity.type: azureWorkloadIdentity", "agent_client_id"}},
		{"irsa role not an ARN", func(v map[string]any) {
			v["identity"] = map[string]any{"type": "irsa", "irsa": map[string]any{"roleARN": "prod-dovetail-agent"}}
		}, []string{"identity/irsa/roleARN", "does not match pattern"}},
		{"workload identity client id", func(v map[string]any) {
			v["identity"] = map[string]any{"type": "azureWorkloadIdentity", "azureWorkloadIdentity": map[string]any{"clientID": "agent"}}
		}, []string{"azureWorkloadIdentity/clientID"}},
		{"misspelt key", func(v map[string]any) { v["serviceMonitor"] = map[string]any{"enable": true} }, []string{"serviceMonitor", "enable"}},
		{"workers off NATS", func(v map[string]any) { v["workers"] = map[string]any{"enabled": true} }, []string{"workers.enabled", "transport: nats", "Lambda"}},
		{"scheduled events on sqs", func(v map[string]any) { v["scheduledEvents"] = map[string]any{"enabled": true} }, []string{"scheduledEvents.enabled", "transport is sqs"}},
		{"nats without a server", func(v map[string]any) { v["transport"] = "nats" }, []string{"nats.url", "nats.server.enabled"}},
		{"nats without credentials", func(v map[string]any) {
			v["transport"], v["nats"] = "nats", map[string]any{"url": "nats://nats.queue.svc:4222"}
		}, []string{"nats.auth.agent.secretName: required", "nats.insecureNoAuth"}},
		{"workers without credentials", func(v map[string]any) {
			v["transport"], v["workers"] = "nats", map[string]any{"enabled": true}
			v["nats"] = map[string]any{"url": "nats://nats.queue.svc:4222", "auth": map[string]any{"agent": map[string]any{"secretName": "a"}}}
		}, []string{"nats.auth.function.secretName: required"}},
		{"bundled server without public key", func(v map[string]any) {
			v["transport"] = "nats"
			v["nats"] = map[string]any{"server": map[string]any{"enabled": true}, "tls": map[string]any{"secretName": "t"},
				"auth": map[string]any{"agent": map[string]any{"secretName": "a"}}}
		}, []string{"nats.auth.agent.publicKey: required with nats.server.enabled"}},
		{"bundled server without TLS", func(v map[string]any) {
			v["transport"] = "nats"
			v["nats"] = map[string]any{"server": map[string]any{"enabled": true},
				"auth": map[string]any{"agent": map[string]any{"secretName": "a", "publicKey": rolePublicKeys[natsauth.RoleAgent]}}}
		}, []string{"nats.tls.secretName: required with nats.server.enabled"}},
		{"seed as public key", func(v map[string]any) {
			v["transport"] = "nats"
			v["nats"] = map[string]any{"url": "nats://n:4222", "auth": map[string]any{"agent": map[string]any{"secretName": "a",
				"publicKey": newUserSeed()}}}
		}, []string{"nats/auth/agent/publicKey", "does not match pattern"}},
		{"agent PDB allowing no eviction", func(v map[string]any) { v["podDisruptionBudget"] = map[string]any{"maxUnavailable": 0} },
			[]string{"podDisruptionBudget/maxUnavailable", "minimum"}},
		{"agent PDB allowing no eviction, as a percentage", func(v map[string]any) { v["podDisruptionBudget"] = map[string]any{"maxUnavailable": "0%"} },
			[]string{"podDisruptionBudget/maxUnavailable", "does not match pattern"}},
		{"agent extra arg", func(v map[string]any) { v["agent"] = map[string]any{"extraArgs": []any{"batch-idle=2s"}} }, []string{"agent/extraArgs/0"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := clone(sqsValues)
			c.set(v)
			_, err := Render("dovetail", testNamespace, v)
			if err == nil {
				t.Fatal("rendered, want an error")
			}
			t.Log(err)
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// clone deep-copies a values map through YAML.
func clone(v map[string]any) map[string]any {
	b, err := yaml.Marshal(v)
	if err != nil {
		panic(err)
	}
	out := map[string]any{}
	if err := yaml.Unmarshal(b, &out); err != nil {
		panic(err)
	}
	return out
}

// With transport eventgrid the Scheduled Events DaemonSet publishes to the notices topic with
// the agent's ServiceAccount and workload identity, and mounts no API token; without the
// notices topic the install fails naming the value.
func TestScheduledEventsOnEventGrid(t *testing.T) {
	v := clone(eventGridValues)
	v["scheduledEvents"] = map[string]any{"enabled": true}
	if _, err := Render("dovetail", testNamespace, v); err == nil || !strings.Contains(err.Error(), "eventgrid.noticesTopicEndpoint") {
		t.Fatalf("no notices topic: %v, want an error naming eventgrid.noticesTopicEndpoint", err)
	}
	v["eventgrid"].(map[string]any)["noticesTopicEndpoint"] = "https://dt-notices.westeurope-1.eventgrid.azure.net/api/events"
	r := render(t, v)
	ds := get[*appsv1.DaemonSet](t, r, "DaemonSet/"+testNamespace+"/dovetail-scheduled-events")
	pod := ds.Spec.Template
	want := []string{"--cluster=aks-prod", "--transport=eventgrid", "--eventgrid-notices-topic-endpoint=https://dt-notices.westeurope-1.eventgrid.azure.net/api/events", "--interval=1s"}
	ctr := pod.Spec.Containers[0]
	if !reflect.DeepEqual(ctr.Args, want) {
		t.Errorf("args\n got %q\nwant %q", ctr.Args, want)
	}
	sa := get[*corev1.ServiceAccount](t, r, "ServiceAccount/"+testNamespace+"/"+pod.Spec.ServiceAccountName)
	if pod.Labels["azure.workload.identity/use"] != "true" || sa.Annotations["azure.workload.identity/client-id"] != "6f1a2b3c-4d5e-4f60-8a7b-9c0d1e2f3a4b" {
		t.Errorf("pod labels %v, service account %s annotations %v: want the agent's workload identity", pod.Labels, sa.Name, sa.Annotations)
	}
	if pod.Spec.AutomountServiceAccountToken == nil || *pod.Spec.AutomountServiceAccountToken {
		t.Error("the DaemonSet mounts an API token it never uses")
	}
	if len(ctr.Env) != 1 || ctr.Env[0].Name != "NODE_NAME" || ctr.Env[0].ValueFrom.FieldRef.FieldPath != "spec.nodeName" {
		t.Errorf("env %+v, want NODE_NAME from spec.nodeName", ctr.Env)
	}
}

// newUserSeed is a fresh nkey user seed (S...), what an operator must never put in values.
func newUserSeed() string {
	kp, err := nkeys.CreateUser()
	if err != nil {
		panic(err)
	}
	seed, err := kp.Seed()
	if err != nil {
		panic(err)
	}
	return string(seed)
}

// checkServerPermissions: the bundled server's users are exactly the roles' public keys, each
// with natsauth.For's permissions (the chart's template spells the Go table; this keeps them equal).
func checkServerPermissions(t *testing.T, opts *server.Options, cluster string) {
	t.Helper()
	if len(opts.Users) != 0 || len(opts.Nkeys) != len(natsauth.Roles) {
		t.Fatalf("server users %d, nkey users %d; want %d nkey users, one per role", len(opts.Users), len(opts.Nkeys), len(natsauth.Roles))
	}
	byKey := map[string]*server.NkeyUser{}
	for _, u := range opts.Nkeys {
		byKey[u.Nkey] = u
	}
	for _, role := range natsauth.Roles {
		u := byKey[rolePublicKeys[role]]
		if u == nil || u.Permissions == nil {
			t.Errorf("role %s: no user with its key and permissions", role)
			continue
		}
		want, err := natsauth.For(role, cluster)
		if err != nil {
			t.Fatal(err)
		}
		got := natsauth.Permissions{
			Publish:   natsauth.SubjectPermission{Allow: u.Permissions.Publish.Allow, Deny: u.Permissions.Publish.Deny},
			Subscribe: natsauth.SubjectPermission{Allow: u.Permissions.Subscribe.Allow, Deny: u.Permissions.Subscribe.Deny},
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("role %s: the chart's server grants\n%+v\nnatsauth.For:\n%+v", role, got, want)
		}
	}
}

// checkNATSClient: a NATS client pod mounts its role's Secret (the nkey only) and the CA
// (ca.crt only, never the server's key) read-only, and, when lookup is given, its own flags
// point at the mounted files.
func checkNATSClient(t *testing.T, name string, pod corev1.PodSpec, secret string, lookup func(string) *pflag.Flag) {
	t.Helper()
	vols := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		vols[v.Name] = v
	}
	creds, ca := vols["nats-credentials"], vols["nats-tls-ca"]
	if creds.Secret == nil || creds.Secret.SecretName != secret || len(creds.Secret.Items) != 1 || creds.Secret.Items[0].Key != "nkey" {
		t.Errorf("%s: credentials volume %+v, want Secret %s key nkey", name, creds.VolumeSource, secret)
	}
	if ca.Secret == nil || ca.Secret.SecretName != "dovetail-nats-tls" || len(ca.Secret.Items) != 1 || ca.Secret.Items[0].Key != "ca.crt" {
		t.Errorf("%s: CA volume %+v, want ca.crt of dovetail-nats-tls only", name, ca.VolumeSource)
	}
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range pod.Containers[0].VolumeMounts {
		mounts[m.Name] = m
	}
	if m := mounts["nats-credentials"]; m.MountPath != "/etc/dovetail/nats/credentials" || !m.ReadOnly {
		t.Errorf("%s: credentials mount %+v", name, m)
	}
	if m := mounts["nats-tls-ca"]; m.MountPath != "/etc/dovetail/nats/tls" || !m.ReadOnly {
		t.Errorf("%s: CA mount %+v", name, m)
	}
	if lookup != nil {
		if s, c := lookup("nats-nkey-seed").Value.String(), lookup("nats-tls-ca").Value.String(); s != "/etc/dovetail/nats/credentials/nkey" || c != "/etc/dovetail/nats/tls/ca.crt" {
			t.Errorf("%s: --nats-nkey-seed %q --nats-tls-ca %q", name, s, c)
		}
		if lookup("nats-insecure-no-auth").Value.String() != "false" {
			t.Errorf("%s: runs without NATS authentication", name)
		}
	}
}

// writeTLSPair writes a self-signed tls.crt and tls.key into dir.
func writeTLSPair(t *testing.T, dir string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "dovetail-nats"},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{"dovetail-nats.dovetail-system.svc"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	for name, block := range map[string]*pem.Block{"tls.crt": {Type: "CERTIFICATE", Bytes: der}, "tls.key": {Type: "EC PRIVATE KEY", Bytes: kb}} {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// The chart never carries a NATS secret: it renders no Secret, and no manifest holds an nkey
// seed (S + 57 base32 characters) or a PEM private key; the pods get credentials only as
// mounted Secrets the operator made (checkNATSClient).
func TestNoNATSSecretRendered(t *testing.T) {
	seedRE := regexp.MustCompile(`\bS[A-Z][A-Z2-7]{56}\b`)
	ms, err := Render("dovetail", testNamespace, natsValues)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Kind == "Secret" || seedRE.MatchString(m.YAML) || strings.Contains(m.YAML, "PRIVATE KEY") {
			t.Errorf("%s %s carries a secret", m.Kind, m.Name)
		}
	}
	// The check can see a seed: one planted in a ConfigMap's text would be found.
	if !seedRE.MatchString(newUserSeed()) {
		t.Fatal("seed pattern misses a real seed")
	}
}

// workers.aks reaches the Azure workers as their own flags parse them: the default provision
// mode aksscriptless, and bootstrappingclient with its server, the cluster's resource group and
// name; bootstrappingclient without the server or the resource group fails naming the value, and
// a mode the provider does not know fails the schema.
func TestWorkersAKSProvisionMode(t *testing.T) {
	parse := func(t *testing.T, vals map[string]any) cloudflags.Options {
		t.Helper()
		d := get[*appsv1.Deployment](t, render(t, vals), "Deployment/"+testNamespace+"/dovetail-provision")
		var co cloudflags.Options
		cmd := runtime.Command(runtime.Function{Name: "provision", Flags: co.Register})
		if err := cmd.ParseFlags(d.Spec.Template.Spec.Containers[0].Args); err != nil {
			t.Fatal(err)
		}
		return co
	}
	if co := parse(t, natsValues); co.AKSProvisionMode != "aksscriptless" || co.AKSNodeBootstrappingServerURL != "" {
		t.Errorf("default: mode %q, server %q", co.AKSProvisionMode, co.AKSNodeBootstrappingServerURL)
	}
	v := clone(natsValues)
	v["workers"].(map[string]any)["aks"] = map[string]any{"provisionMode": "bootstrappingclient",
		"nodeBootstrappingServerURL": "http://10.0.0.5:8080", "clusterResourceGroup": "rg-aks", "clusterName": "aks-prod"}
	if co := parse(t, v); co.AKSProvisionMode != "bootstrappingclient" || co.AKSNodeBootstrappingServerURL != "http://10.0.0.5:8080" ||
		co.AKSClusterResourceGroup != "rg-aks" || co.AKSClusterName != "aks-prod" {
		t.Errorf("bootstrappingclient: %+v", co)
	}
	for _, c := range []struct {
		aks  map[string]any
		want string
	}{
		{map[string]any{"provisionMode": "bootstrappingclient", "clusterResourceGroup": "rg-aks"}, "workers.aks.nodeBootstrappingServerURL: required"},
		{map[string]any{"provisionMode": "bootstrappingclient", "nodeBootstrappingServerURL": "http://10.0.0.5:8080"}, "workers.aks.clusterResourceGroup: required"},
		{map[string]any{"provisionMode": "scriptless"}, "provisionMode"},
		{map[string]any{"provisionMode": "bootstrappingclient", "nodeBootstrappingServerURL": "10.0.0.5:8080", "clusterResourceGroup": "rg"}, "nodeBootstrappingServerURL"},
	} {
		v := clone(natsValues)
		v["workers"].(map[string]any)["aks"] = c.aks
		if _, err := Render("dovetail", testNamespace, v); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error naming %s", c.aks, err, c.want)
		}
	}
}
