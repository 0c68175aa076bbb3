package localdev

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/dovetail-dev/dovetail/agent"
	"github.com/dovetail-dev/dovetail/e2e/realcluster"
)

// Control planes Options.ControlPlane selects.
const (
	// ControlPlaneMemory is client-go's fake clientset with local stand-ins for the scheduler and
	// the workload controllers (the default).
	ControlPlaneMemory = "memory"
	// ControlPlaneReal is a real etcd, kube-apiserver, kube-controller-manager and kube-scheduler on
	// loopback (binaries from `make controlplane`), with kwok playing the kubelets.
	ControlPlaneReal = "real"
)

// AgentServiceAccount is the agent's identity in a real control plane: agent/rbac.yaml binds it
// to the agent's least-privilege ClusterRole and Roles.
const (
	AgentNamespace      = "dovetail-system"
	AgentServiceAccount = "dovetail-agent"
)

// startRealControlPlane starts the control plane, applies the CRDs (infra/crds, or
// Options.InstallCRDs installs them) and the agent's RBAC (agent/rbac.yaml), and returns the
// cluster: the admin clients for the scenario and the node registrar, the agent's
// service-account token clients for the agent.
func startRealControlPlane(ctx context.Context, o Options, progress *Progress) (*realcluster.ControlPlane, *Cluster, error) {
	root, err := realcluster.RepoRoot()
	if err != nil {
		return nil, nil, fmt.Errorf("--control-plane real needs the dovetail checkout (CRDs, RBAC, binaries): %w", err)
	}
	start := time.Now()
	ro := o.RealControlPlane
	if ro.Logf == nil {
		ro.Logf = progress.Printf
	}
	cp, err := realcluster.Start(ctx, ro)
	if err != nil {
		return nil, nil, err
	}
	ok := false
	defer func() {
		if !ok {
			cp.Stop()
		}
	}()
	progress.Printf("control plane up in %s: %s (admin kubeconfig %s)", time.Since(start).Round(100*time.Millisecond), cp.Server, cp.Kubeconfig)
	if o.InstallCRDs != nil {
		if err := o.InstallCRDs(ctx, cp); err != nil {
			return nil, nil, fmt.Errorf("installing the CRDs: %w", err)
		}
	} else if err := cp.ApplyFiles(ctx, filepath.Join(root, "infra", "crds")); err != nil {
		return nil, nil, err
	}
	if err := cp.ApplyFiles(ctx, filepath.Join(root, "agent", "rbac.yaml")); err != nil {
		return nil, nil, err
	}
	token, err := cp.ServiceAccountToken(ctx, AgentNamespace, AgentServiceAccount, time.Hour)
	if err != nil {
		return nil, nil, err
	}
	c := &Cluster{}
	if c.Kube, err = kubernetes.NewForConfig(cp.Config); err != nil {
		return nil, nil, err
	}
	if c.Dynamic, err = dynamic.NewForConfig(cp.Config); err != nil {
		return nil, nil, err
	}
	agentCfg := cp.TokenConfig(token)
	agentCfg.QPS, agentCfg.Burst = agent.DefaultKubeQPS, agent.DefaultKubeBurst
	if c.AgentKube, err = kubernetes.NewForConfig(agentCfg); err != nil {
		return nil, nil, err
	}
	if c.AgentDynamic, err = dynamic.NewForConfig(agentCfg); err != nil {
		return nil, nil, err
	}
	progress.Printf("applied the CRDs and the agent's RBAC; the agent runs as %s/%s", AgentNamespace, AgentServiceAccount)
	ok = true
	return cp, c, nil
}
