// Command gen renders localdev/manifests/workloads.yaml from the workload spec table
// localdev/manifests/source/workload_specs.yaml (real requests, limits, replicas and scheduling
// constraints of public manifests and Helm charts; provenance in source/README.md).
//
// Run from localdev/manifests:  go run ./gen   (or `go generate ./localdev/manifests/...`).
//
// What it adds that the spec table does not hold, each documented at its table below: container
// images, pod labels and selectors, the namespaces of the charts' install docs, the label selector
// the Karpenter chart patches into its anti-affinity and spread constraints, the istio-proxy
// sidecar (injected into the online-boutique frontend only), the descheduler CronJob schedule and
// the gatekeeper PodDisruptionBudget (from the table's notes).
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

func main() {
	in := flag.String("in", "source/workload_specs.yaml", "workload spec table to read")
	out := flag.String("out", "workloads.yaml", "manifest file to write")
	flag.Parse()
	src, err := os.ReadFile(*in)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
	b, err := Render(src)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
	if err := os.WriteFile(*out, b, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

// specFile is the shape of workload_specs.yaml (read strictly, so a changed table fails loudly).
type specFile struct {
	Description            string                       `json:"description"`
	Sources                map[string]map[string]string `json:"sources"`
	Workloads              []workloadSpec               `json:"workloads"`
	BitnamiResourcePresets map[string]anyMap            `json:"bitnami_resource_presets"`
}

type anyMap = map[string]any

type workloadSpec struct {
	Source                    string                            `json:"source"`
	Kind                      string                            `json:"kind"`
	Name                      string                            `json:"name"`
	Namespace                 *string                           `json:"namespace"`
	Replicas                  *int32                            `json:"replicas"`
	Containers                []containerSpec                   `json:"containers"`
	NodeSelector              map[string]string                 `json:"nodeSelector,omitempty"`
	Tolerations               []corev1.Toleration               `json:"tolerations,omitempty"`
	Affinity                  *corev1.Affinity                  `json:"affinity,omitempty"`
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`
	PriorityClassName         string                            `json:"priorityClassName,omitempty"`
	Note                      string                            `json:"note,omitempty"`
}

type containerSpec struct {
	Name     string            `json:"name"`
	Requests map[string]string `json:"requests"`
	Limits   map[string]string `json:"limits"`
}

// pauseImage stands in where the project's image is not known to us; Dovetail never pulls images.
const pauseImage = "registry.k8s.io/pause:3.10"

// images are the projects' published image repositories. Tags are our best knowledge of a recent
// release and were not checked against the spec commits; they do not affect scheduling.
var images = map[string]string{
	// online-boutique (GoogleCloudPlatform/microservices-demo release manifests).
	"online-boutique/frontend":              "us-central1-docker.pkg.dev/google-samples/microservices-demo/frontend:v0.10.2",
	"online-boutique/adservice":             "us-central1-docker.pkg.dev/google-samples/microservices-demo/adservice:v0.10.2",
	"online-boutique/currencyservice":       "us-central1-docker.pkg.dev/google-samples/microservices-demo/currencyservice:v0.10.2",
	"online-boutique/cartservice":           "us-central1-docker.pkg.dev/google-samples/microservices-demo/cartservice:v0.10.2",
	"online-boutique/redis-cart":            "redis:alpine",
	"online-boutique/loadgenerator":         "us-central1-docker.pkg.dev/google-samples/microservices-demo/loadgenerator:v0.10.2",
	"online-boutique/recommendationservice": "us-central1-docker.pkg.dev/google-samples/microservices-demo/recommendationservice:v0.10.2",
	"online-boutique/checkoutservice":       "us-central1-docker.pkg.dev/google-samples/microservices-demo/checkoutservice:v0.10.2",
	"online-boutique/emailservice":          "us-central1-docker.pkg.dev/google-samples/microservices-demo/emailservice:v0.10.2",
	"online-boutique/paymentservice":        "us-central1-docker.pkg.dev/google-samples/microservices-demo/paymentservice:v0.10.2",
	"online-boutique/shippingservice":       "us-central1-docker.pkg.dev/google-samples/microservices-demo/shippingservice:v0.10.2",
	"online-boutique/productcatalogservice": "us-central1-docker.pkg.dev/google-samples/microservices-demo/productcatalogservice:v0.10.2",
	// sock-shop (microservices-demo/microservices-demo complete-demo.yaml).
	"sock-shop/carts":             "weaveworksdemos/carts:0.4.8",
	"sock-shop/carts-db":          "mongo",
	"sock-shop/catalogue":         "weaveworksdemos/catalogue:0.3.5",
	"sock-shop/catalogue-db":      "weaveworksdemos/catalogue-db:0.3.0",
	"sock-shop/front-end":         "weaveworksdemos/front-end:0.3.12",
	"sock-shop/orders":            "weaveworksdemos/orders:0.4.7",
	"sock-shop/orders-db":         "mongo",
	"sock-shop/payment":           "weaveworksdemos/payment:0.4.3",
	"sock-shop/queue-master":      "weaveworksdemos/queue-master:0.3.1",
	"sock-shop/rabbitmq":          "rabbitmq:3.6.8-management",
	"sock-shop/rabbitmq-exporter": "kbudde/rabbitmq-exporter",
	"sock-shop/session-db":        "redis:alpine",
	"sock-shop/shipping":          "weaveworksdemos/shipping:0.4.8",
	"sock-shop/user":              "weaveworksdemos/user:0.4.7",
	"sock-shop/user-db":           "weaveworksdemos/user-db:0.3.0",
	// Charts.
	"karpenter-aws-chart/controller":      "public.ecr.aws/karpenter/controller:1.6.0",
	"karpenter-azure-chart/controller":    pauseImage, // image path not known to us
	"ingress-nginx-chart/controller":      "registry.k8s.io/ingress-nginx/controller:v1.11.2",
	"metrics-server-chart/metrics-server": "registry.k8s.io/metrics-server/metrics-server:v0.7.2",
	"coredns-chart/coredns":               "coredns/coredns:1.11.3",
	"coredns-chart/autoscaler":            "registry.k8s.io/cpa/cluster-proportional-autoscaler:1.8.9",
	"gatekeeper-chart/manager":            "openpolicyagent/gatekeeper:v3.17.1",
	"descheduler-chart/descheduler":       "registry.k8s.io/descheduler/descheduler:v0.31.0",
	"istio-discovery-chart/discovery":     "docker.io/istio/pilot:1.23.2",
	"istio-discovery-chart/istio-proxy":   "docker.io/istio/proxyv2:1.23.2",
}

// namespaces: the table leaves these charts' namespace unset; we use the namespace each
// project's install docs use. online-boutique is installed into "default".
var chartNamespaces = map[string]string{
	"ingress-nginx-chart":   "ingress-nginx",
	"metrics-server-chart":  "kube-system",
	"coredns-chart":         "kube-system",
	"gatekeeper-chart":      "gatekeeper-system",
	"descheduler-chart":     "kube-system",
	"istio-discovery-chart": "istio-system",
}

// renamed: both Karpenter charts install a Deployment "karpenter" in kube-system; two objects
// cannot share a name, so the Azure one is called karpenter-azure (its own release name).
var renamed = map[string]string{"karpenter-azure-chart/karpenter": "karpenter-azure"}

// meshed lists the Deployments that get the istio-proxy sidecar. One meshed Deployment shows
// the native-sidecar resource rule without inflating the whole scenario.
var meshed = map[string]bool{"online-boutique/frontend": true}

// Pod labels. online-boutique uses app=<name>, sock-shop name=<name> (their manifests); charts use
// app.kubernetes.io/{name,instance}; gatekeeper's anti-affinity selects gatekeeper.sh/operation,
// so its pods carry the labels its chart gives them.
func podLabels(w workloadSpec, name string) map[string]string {
	switch w.Source {
	case "online-boutique":
		return map[string]string{"app": name}
	case "sock-shop":
		return map[string]string{"name": name}
	case "gatekeeper-chart":
		if name == "gatekeeper-audit" {
			return map[string]string{"control-plane": "audit-controller", "gatekeeper.sh/operation": "audit", "gatekeeper.sh/system": "yes"}
		}
		return map[string]string{"control-plane": "controller-manager", "gatekeeper.sh/operation": "webhook", "gatekeeper.sh/system": "yes"}
	}
	return map[string]string{"app.kubernetes.io/name": strings.TrimSuffix(w.Name, "-azure"), "app.kubernetes.io/instance": name}
}

var (
	pdbNote      = regexp.MustCompile(`PodDisruptionBudget minAvailable (\d+)`)
	graceNote    = regexp.MustCompile(`terminationGracePeriodSeconds (\d+)`)
	scheduleNote = regexp.MustCompile(`schedule (\S+ \S+ \S+ \S+ \S+)`)
)

// Render turns the spec table into the multi-document manifest file.
func Render(src []byte) ([]byte, error) {
	var spec specFile
	if err := yaml.UnmarshalStrict(src, &spec); err != nil {
		return nil, fmt.Errorf("reading spec table: %w", err)
	}
	var sidecar *containerSpec
	for _, w := range spec.Workloads {
		if w.Kind == "Sidecar" {
			c := w.Containers[0]
			sidecar = &c
		}
	}
	if sidecar == nil {
		return nil, fmt.Errorf("spec table has no Sidecar entry for istio-proxy")
	}

	var buf bytes.Buffer
	buf.WriteString(header)

	// Namespaces first, so `kubectl apply -f` creates them before their objects.
	nsSeen := map[string]bool{}
	var nsOrder []string
	for _, w := range spec.Workloads {
		if w.Kind == "Sidecar" {
			continue
		}
		if ns := namespaceOf(w); ns != "default" && ns != "kube-system" && !nsSeen[ns] {
			nsSeen[ns] = true
			nsOrder = append(nsOrder, ns)
		}
	}
	for _, ns := range nsOrder {
		obj := &corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}, ObjectMeta: metav1.ObjectMeta{Name: ns}}
		if err := writeDoc(&buf, "", obj, nil); err != nil {
			return nil, err
		}
	}

	for _, w := range spec.Workloads {
		if w.Kind == "Sidecar" {
			continue // injected below, not a workload of its own
		}
		if err := renderWorkload(&buf, spec, w, sidecar); err != nil {
			return nil, fmt.Errorf("%s %s: %w", w.Source, w.Name, err)
		}
	}
	return buf.Bytes(), nil
}

const header = `# GENERATED by localdev/manifests/gen from source/workload_specs.yaml; do not edit.
# Regenerate: cd localdev/manifests && go run ./gen
#
# The workloads of the spec table as real Kubernetes objects: every request, limit, replica
# count, nodeSelector, toleration, affinity, topology spread constraint and priority class is the
# table's (provenance: source/README.md). Added here: images (tags unverified; Dovetail never
# pulls them; registry.k8s.io/pause:3.10 where the image is unknown to us), labels and selectors,
# chart namespaces, the Karpenter chart's default label selectors, istio-proxy as a native
# sidecar in the online-boutique frontend, the descheduler CronJob and the gatekeeper PDB; the
# Azure Karpenter Deployment is renamed karpenter-azure (both charts name theirs "karpenter").
`

func namespaceOf(w workloadSpec) string {
	if w.Namespace != nil && *w.Namespace != "" {
		return *w.Namespace
	}
	if ns, ok := chartNamespaces[w.Source]; ok {
		return ns
	}
	return "default"
}

// imageFor looks the image up by workload name (single-container workloads), then by
// container name (chart containers, multi-container pods).
func imageFor(w workloadSpec, container string) string {
	if img, ok := images[w.Source+"/"+w.Name]; ok && len(w.Containers) == 1 {
		return img
	}
	if img, ok := images[w.Source+"/"+container]; ok {
		return img
	}
	return pauseImage
}

func renderWorkload(buf *bytes.Buffer, spec specFile, w workloadSpec, sidecar *containerSpec) error {
	name := w.Name
	if n, ok := renamed[w.Source+"/"+w.Name]; ok {
		name = n
	}
	ns := namespaceOf(w)
	labels := podLabels(w, name)
	if w.Replicas == nil {
		return fmt.Errorf("replicas missing")
	}
	if len(w.Containers) == 0 {
		return fmt.Errorf("no containers")
	}

	pod := corev1.PodSpec{
		NodeSelector:              w.NodeSelector,
		Tolerations:               w.Tolerations,
		Affinity:                  w.Affinity.DeepCopy(),
		TopologySpreadConstraints: w.TopologySpreadConstraints,
		PriorityClassName:         w.PriorityClassName,
	}
	// The Karpenter chart patches a label selector for its own pods into required anti-affinity
	// terms and spread constraints that have none (charts/karpenter/templates/deployment.yaml,
	// "patchAffinity"); without one they would select no pods and mean nothing.
	sel := &metav1.LabelSelector{MatchLabels: labels}
	if a := pod.Affinity; a != nil && a.PodAntiAffinity != nil {
		for i := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
			t := &a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[i]
			if t.LabelSelector == nil {
				t.LabelSelector = sel.DeepCopy()
			}
		}
	}
	for i := range pod.TopologySpreadConstraints {
		if pod.TopologySpreadConstraints[i].LabelSelector == nil {
			pod.TopologySpreadConstraints[i].LabelSelector = sel.DeepCopy()
		}
	}
	if m := graceNote.FindStringSubmatch(w.Note); m != nil {
		var g int64
		fmt.Sscan(m[1], &g)
		pod.TerminationGracePeriodSeconds = &g
	}
	resources := map[string]containerSpec{} // container name -> table numbers, written verbatim
	for _, c := range w.Containers {
		pod.Containers = append(pod.Containers, corev1.Container{Name: c.Name, Image: imageFor(w, c.Name)})
		resources[c.Name] = c
	}
	key := w.Source + "/" + w.Name
	var comment []string
	if w.Note != "" {
		comment = append(comment, "note from the spec table: "+w.Note)
	}
	if name != w.Name {
		comment = append(comment, fmt.Sprintf("renamed %s -> %s: both Karpenter charts install Deployment kube-system/%s", w.Name, name, w.Name))
	}
	if meshed[key] {
		always := corev1.ContainerRestartPolicyAlways
		pod.InitContainers = append(pod.InitContainers, corev1.Container{
			Name: sidecar.Name, Image: images["istio-discovery-chart/istio-proxy"], RestartPolicy: &always,
		})
		resources[sidecar.Name] = *sidecar
		comment = append(comment,
			"meshed: istio-proxy injected as a native sidecar (init container with restartPolicy: Always,",
			"as Istio does with native sidecars enabled); requests/limits from the spec table's istio-proxy entry.")
	}

	meta := metav1.ObjectMeta{Name: name, Namespace: ns}
	tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: pod}
	var obj runtime.Object
	podPath := []string{"spec", "template", "spec"}
	switch w.Kind {
	case "Deployment":
		obj = &appsv1.Deployment{
			TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}, ObjectMeta: meta,
			Spec: appsv1.DeploymentSpec{Replicas: w.Replicas, Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl},
		}
	case "CronJob":
		m := scheduleNote.FindStringSubmatch(w.Note)
		if m == nil {
			return fmt.Errorf("CronJob without a schedule in its note")
		}
		// A Job's pods must not restart in place; the descheduler chart uses Never.
		tmpl.Spec.RestartPolicy = corev1.RestartPolicyNever
		obj = &batchv1.CronJob{
			TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "CronJob"}, ObjectMeta: meta,
			Spec: batchv1.CronJobSpec{Schedule: m[1], JobTemplate: batchv1.JobTemplateSpec{
				Spec: batchv1.JobSpec{Parallelism: w.Replicas, Template: tmpl}}},
		}
		podPath = []string{"spec", "jobTemplate", "spec", "template", "spec"}
	default:
		return fmt.Errorf("kind %q is not rendered", w.Kind)
	}
	if err := writeDoc(buf, fmt.Sprintf("%s (source: %s)", key, w.Source), obj, func(u map[string]any) error {
		return setResources(u, podPath, resources)
	}, comment...); err != nil {
		return err
	}

	if m := pdbNote.FindStringSubmatch(w.Note); m != nil {
		minAvailable := intstr.Parse(m[1])
		pdb := &policyv1.PodDisruptionBudget{
			TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &minAvailable, Selector: &metav1.LabelSelector{MatchLabels: labels}},
		}
		if err := writeDoc(buf, fmt.Sprintf("%s PodDisruptionBudget (from the spec table's note)", key), pdb, nil); err != nil {
			return err
		}
	}
	return nil
}

// setResources writes each container's requests and limits as the table's strings, so the file
// shows "2048Mi" where resource.Quantity would print "2Gi" (same value, but readers compare text).
func setResources(u map[string]any, podPath []string, byName map[string]containerSpec) error {
	for _, list := range []string{"initContainers", "containers"} {
		cs, found, err := unstructured.NestedSlice(u, append(podPath, list)...)
		if err != nil {
			return err
		}
		if !found {
			continue
		}
		for i, c := range cs {
			cm := c.(map[string]any)
			spec, ok := byName[cm["name"].(string)]
			if !ok {
				return fmt.Errorf("container %v has no resources in the table", cm["name"])
			}
			res := map[string]any{}
			for field, m := range map[string]map[string]string{"requests": spec.Requests, "limits": spec.Limits} {
				if len(m) == 0 {
					continue
				}
				rm := map[string]any{}
				for k, v := range m {
					if _, err := resource.ParseQuantity(v); err != nil {
						return fmt.Errorf("container %s %s.%s: %w", spec.Name, field, k, err)
					}
					rm[k] = v
				}
				res[field] = rm
			}
			if len(res) > 0 {
				cm["resources"] = res
			} else {
				delete(cm, "resources")
			}
			cs[i] = cm
		}
		if err := unstructured.SetNestedSlice(u, cs, append(podPath, list)...); err != nil {
			return err
		}
	}
	return nil
}

// writeDoc appends "---", comment lines and the object as YAML (keys sorted, no status, no
// null creationTimestamps).
func writeDoc(buf *bytes.Buffer, title string, obj runtime.Object, edit func(map[string]any) error, comment ...string) error {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return err
	}
	delete(u, "status")
	prune(u)
	if edit != nil {
		if err := edit(u); err != nil {
			return err
		}
	}
	b, err := yaml.Marshal(u)
	if err != nil {
		return err
	}
	buf.WriteString("---\n")
	if title != "" {
		buf.WriteString("# " + title + "\n")
	}
	for _, c := range comment {
		buf.WriteString("# " + c + "\n")
	}
	buf.Write(b)
	return nil
}

// prune drops the null and empty values the typed structs leave behind (creationTimestamp: null,
// resources: {}, strategy: {}), so the file reads like a hand-written manifest.
func prune(m map[string]any) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		switch v := m[k].(type) {
		case nil:
			delete(m, k)
		case map[string]any:
			prune(v)
			if len(v) == 0 {
				delete(m, k)
			}
		case []any:
			for _, e := range v {
				if em, ok := e.(map[string]any); ok {
					prune(em)
				}
			}
		}
	}
}
