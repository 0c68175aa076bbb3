package seed

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	apiv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/manifests"
)

// Expected numbers are counted by hand from source/workload_specs.yaml:
//
//	replicas: online-boutique 12 x 1, sock-shop 14 x 1, karpenter (aws) 2, karpenter (azure) 2,
//	ingress-nginx 1, metrics-server 1, coredns 1, coredns-autoscaler 1, gatekeeper-controller-
//	manager 3, gatekeeper-audit 1, descheduler 1, istiod 1  => 40 pods from 36 workloads
//	(the 37th entry, istio-proxy, is a sidecar, not a workload).
//	cpu requests of the app containers (m): online-boutique 100+200+100+200+70+300+100+100+100+
//	100+100+100 = 1570; sock-shop 100+100+100+100+99+100+100+100 = 799 (DBs and rabbitmq request
//	nothing); charts 100+100+100+20+3x100+100+500+500 = 1720; total 4089.
//	memory requests (Mi): online-boutique 1368, sock-shop 1700, charts 90+200+128+10+3x512+512+
//	256+2048 = 4780; total 7848.
//	plus the istio-proxy native sidecar of the frontend: 100m, 128Mi.
const (
	wantWorkloads     = 36
	wantPendingPods   = 40
	wantCPUMilli      = 4089
	wantMemoryMi      = 7848
	wantBoundPods     = 4 // aws-node and kube-proxy on each of the two system nodes
	wantDaemonSets    = 2
	wantNamespaces    = 4 // sock-shop, ingress-nginx, gatekeeper-system, istio-system
	wantPDBs          = 1 // gatekeeper-controller-manager
	wantNodes         = 2
	wantNodePools     = 1
	wantNodeClasses   = 1
	sidecarCPUMilli   = 100
	sidecarMemoryMi   = 128
	systemNodeCPU     = 1930 // m5.large allocatable, EKS rules (see system-nodes.yaml)
	systemNodeMemMi   = 6903
	mebibyte          = 1 << 20
	frontendNamespace = "default"
)

func check(t *testing.T, s *manifests.Set) {
	t.Helper()
	for what, c := range map[string][2]int{
		"NodePools": {len(s.NodePools), wantNodePools}, "NodeClasses": {len(s.NodeClasses), wantNodeClasses},
		"Nodes": {len(s.Nodes), wantNodes}, "DaemonSets": {len(s.DaemonSets), wantDaemonSets},
		"Namespaces": {len(s.Namespaces), wantNamespaces}, "PDBs": {len(s.PDBs), wantPDBs},
		"Workloads": {len(s.Workloads), wantWorkloads}, "bound Pods": {len(s.Pods), wantBoundPods},
	} {
		if c[0] != c[1] {
			t.Errorf("%s: got %d, want %d", what, c[0], c[1])
		}
	}

	var pending []*corev1.Pod
	for _, p := range s.ExpandPods() {
		if p.Spec.NodeName == "" {
			pending = append(pending, p)
		}
	}
	if len(pending) != wantPendingPods {
		t.Errorf("pending pods: got %d, want %d", len(pending), wantPendingPods)
	}
	var cpu, mem int64
	for _, p := range pending {
		for _, c := range p.Spec.Containers {
			cpu += c.Resources.Requests.Cpu().MilliValue()
			mem += c.Resources.Requests.Memory().Value()
		}
	}
	if cpu != wantCPUMilli || mem != wantMemoryMi*mebibyte {
		t.Errorf("app container requests: got %dm %dMi, want %dm %dMi", cpu, mem/mebibyte, wantCPUMilli, wantMemoryMi)
	}

	np := s.NodePools[0]
	if np.Name != "default" || np.Spec.Disruption.ConsolidationPolicy != apiv1.ConsolidationPolicyWhenEmptyOrUnderutilized ||
		len(np.Spec.Template.Spec.Requirements) != 5 || np.Spec.Limits.Cpu().Value() != 1000 {
		t.Errorf("NodePool default: %+v", np.Spec)
	}
	if nc := s.NodeClasses[0].EC2; nc.Spec.AMISelectorTerms[0].Alias != "bottlerocket@latest" || nc.Spec.Role != "KarpenterNodeRole-dovetail-dev" {
		t.Errorf("EC2NodeClass default: %+v", nc.Spec)
	}
	for _, n := range s.Nodes {
		if _, ok := n.Labels[apiv1.LabelNodePool]; ok || n.Labels["eks.amazonaws.com/nodegroup"] != "system" {
			t.Errorf("node %s labels: %v", n.Name, n.Labels)
		}
		a := n.Status.Allocatable
		if a.Cpu().MilliValue() != systemNodeCPU || a.Memory().Value() != systemNodeMemMi*mebibyte || a.Pods().Value() != 29 {
			t.Errorf("node %s allocatable: %v", n.Name, a)
		}
	}

	// The frontend carries istio-proxy as a native sidecar with the table's numbers.
	for _, p := range pending {
		if p.Namespace != frontendNamespace || p.Name != "frontend-0" {
			continue
		}
		if len(p.Spec.InitContainers) != 1 {
			t.Fatalf("frontend init containers: %d", len(p.Spec.InitContainers))
		}
		ic := p.Spec.InitContainers[0]
		if ic.Name != "istio-proxy" || ic.RestartPolicy == nil || *ic.RestartPolicy != corev1.ContainerRestartPolicyAlways ||
			ic.Resources.Requests.Cpu().MilliValue() != sidecarCPUMilli || ic.Resources.Requests.Memory().Value() != sidecarMemoryMi*mebibyte ||
			ic.Resources.Limits.Cpu().MilliValue() != 2000 || ic.Resources.Limits.Memory().Value() != 1024*mebibyte {
			t.Errorf("istio-proxy sidecar: %+v", ic)
		}
	}
}

func TestLoadDirectory(t *testing.T) {
	s, err := manifests.Load(".")
	if err != nil {
		t.Fatal(err)
	}
	check(t, s)
	// The only skipped document is the spec table in source/ (not a Kubernetes object).
	if len(s.Warnings) != 1 {
		t.Errorf("warnings: %q", s.Warnings)
	}
}

func TestEmbeddedFS(t *testing.T) {
	s, err := manifests.LoadFS(FS, ".")
	if err != nil {
		t.Fatal(err)
	}
	check(t, s)
	if len(s.Warnings) != 0 {
		t.Errorf("warnings: %q", s.Warnings)
	}
}
