package main

import (
	"fmt"
	"math"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Namespace holds every workload of a run.
const Namespace = "scale"

// kind is one row of the hand-made mix: what fraction of the N pods it gets, how many
// replicas each of its workloads has, what each pod requests, and its placement constraint.
// docs/scale.md, "The pods", describes the same table.
type kind struct {
	name     string
	fraction float64 // of N
	replicas int     // per workload; the last workload of a kind takes the remainder
	cpu, mem string  // requests per pod (millicores, MiB as Kubernetes quantities)
	workload string  // "Deployment", "Job" or "StatefulSet"
	// zoneSpread: topologySpreadConstraints maxSkew 1 over topology.kubernetes.io/zone,
	// DoNotSchedule. hostAntiAffinity: required podAntiAffinity on kubernetes.io/hostname
	// against the workload's own pods (one pod per node).
	zoneSpread, hostAntiAffinity bool
}

// mix is the pod mix of every run. web is last: it takes whatever rounding leaves.
var mix = []kind{
	{name: "api", fraction: 0.20, replicas: 20, cpu: "1", mem: "2Gi", workload: "Deployment", zoneSpread: true},
	{name: "cache", fraction: 0.05, replicas: 10, cpu: "2", mem: "8Gi", workload: "Deployment", hostAntiAffinity: true},
	{name: "batch", fraction: 0.20, replicas: 20, cpu: "250m", mem: "512Mi", workload: "Job"},
	{name: "db", fraction: 0.05, replicas: 10, cpu: "1", mem: "4Gi", workload: "StatefulSet", zoneSpread: true},
	{name: "web", fraction: 0.50, replicas: 25, cpu: "500m", mem: "1Gi", workload: "Deployment", zoneSpread: true},
}

// Workload is one generated controller: exactly one of Deployment, Job, StatefulSet is set.
type Workload struct {
	Kind        string
	Name        string
	Replicas    int
	Deployment  *appsv1.Deployment
	Job         *batchv1.Job
	StatefulSet *appsv1.StatefulSet
}

// PodsPerKind splits n pods over the mix: each kind gets round(n × fraction), the last kind
// (web) the rest, so the counts always sum to n. An error names n when it is not positive.
func PodsPerKind(n int) ([]int, error) {
	if n < 1 {
		return nil, fmt.Errorf("-n: %d is not a positive pod count", n)
	}
	out := make([]int, len(mix))
	left := n
	for i, k := range mix[:len(mix)-1] {
		c := min(int(math.Round(float64(n)*k.fraction)), left)
		out[i] = c
		left -= c
	}
	out[len(mix)-1] = left
	return out, nil
}

// Workloads builds the mix's controllers for n pods: per kind, ⌈count/replicas⌉ workloads of
// the kind's replicas, the last one the remainder.
func Workloads(n int) ([]Workload, error) {
	counts, err := PodsPerKind(n)
	if err != nil {
		return nil, err
	}
	var out []Workload
	for i, k := range mix {
		for j, left := 0, counts[i]; left > 0; j++ {
			r := min(k.replicas, left)
			left -= r
			out = append(out, k.build(fmt.Sprintf("%s-%d", k.name, j), r))
		}
	}
	return out, nil
}

// ScaledDown is replicas after the consolidation phase's cut: r − round(r × cut).
func ScaledDown(r int, cut float64) int { return r - int(math.Round(float64(r)*cut)) }

func (k kind) podTemplate(name string) corev1.PodTemplateSpec {
	labels := map[string]string{"app": name, "mix": k.name}
	spec := corev1.PodSpec{
		// Terminate at once on scale-down: kwok has no process to stop, and the default 30 s
		// would only add the same constant to both sides' consolidation times.
		TerminationGracePeriodSeconds: new(int64),
		Containers: []corev1.Container{{
			Name: "app", Image: "registry.k8s.io/pause:3.10",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse(k.cpu), corev1.ResourceMemory: resource.MustParse(k.mem)}},
		}},
	}
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}
	if k.zoneSpread {
		spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
			MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone, WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: sel}}
	}
	if k.hostAntiAffinity {
		spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				TopologyKey: corev1.LabelHostname, LabelSelector: sel}}}}
	}
	if k.workload == "Job" {
		spec.RestartPolicy = corev1.RestartPolicyNever
	}
	return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec}
}

func (k kind) build(name string, replicas int) Workload {
	meta := metav1.ObjectMeta{Name: name, Namespace: Namespace}
	tmpl := k.podTemplate(name)
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}
	r := int32(replicas)
	w := Workload{Kind: k.workload, Name: name, Replicas: replicas}
	switch k.workload {
	case "Deployment":
		w.Deployment = &appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{Replicas: &r, Selector: sel, Template: tmpl}}
	case "StatefulSet":
		// Parallel: the StatefulSet controller creates every replica at once (OrderedReady would
		// wait for each pod to be Ready before creating the next, measuring the controller).
		w.StatefulSet = &appsv1.StatefulSet{ObjectMeta: meta, Spec: appsv1.StatefulSetSpec{Replicas: &r, Selector: sel,
			Template: tmpl, ServiceName: name, PodManagementPolicy: appsv1.ParallelPodManagement}}
	case "Job":
		// Parallelism = completions: every pod at once; kwok never completes them, so they stay
		// Running like a long batch job. Scale-down lowers parallelism: the Job controller then
		// deletes the excess active pods.
		// A pod evicted by a consolidation's drain is not the job's failure: the rule
		// Kubernetes documents for that (podFailurePolicy, action Ignore on the DisruptionTarget
		// condition; needs restartPolicy Never) keeps the Job from reaching its backoffLimit
		// and deleting its pods while either side consolidates.
		w.Job = &batchv1.Job{ObjectMeta: meta, Spec: batchv1.JobSpec{Parallelism: &r, Completions: new(r), Template: tmpl,
			PodFailurePolicy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
				Action: batchv1.PodFailurePolicyActionIgnore,
				OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{
					Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}}}}}}}
	}
	return w
}

// Template is the workload's pod template.
func (w Workload) Template() corev1.PodTemplateSpec {
	switch {
	case w.Deployment != nil:
		return w.Deployment.Spec.Template
	case w.StatefulSet != nil:
		return w.StatefulSet.Spec.Template
	case w.Job != nil:
		return w.Job.Spec.Template
	}
	return corev1.PodTemplateSpec{}
}
