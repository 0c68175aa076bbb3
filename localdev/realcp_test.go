package localdev

import (
	"context"
	"strings"
	"testing"
)

// Start refuses a bad --control-plane before it starts anything (the real control plane itself
// is exercised by the e2e suite, `make e2e`).
func TestStartRefusesBadControlPlane(t *testing.T) {
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{ControlPlane: "kind"}, `--control-plane: "kind" is not "memory" or "real"`},
		{Options{ControlPlane: ControlPlaneReal, Kubeconfig: "/tmp/kc"}, "cannot be combined with --kubeconfig /tmp/kc"},
	} {
		env, err := Start(context.Background(), c.o)
		if err == nil {
			env.Stop()
			t.Fatalf("%+v: started, want error %q", c.o, c.want)
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: err = %v, want %q", c.o, err, c.want)
		}
	}
}

func TestRealControlPlaneDefaults(t *testing.T) {
	o := Options{ControlPlane: ControlPlaneReal}
	o.defaults()
	// The agent runs in the namespace agent/rbac.yaml grants it, and the run allows for the
	// control plane's start.
	if o.Namespace != AgentNamespace || o.Timeout.Minutes() != 5 {
		t.Errorf("namespace %q timeout %s, want %q and 5m", o.Namespace, o.Timeout, AgentNamespace)
	}
	m := Options{}
	m.defaults()
	if m.Namespace != "kube-system" || m.Timeout.Minutes() != 2 {
		t.Errorf("in memory: namespace %q timeout %s, want kube-system and 2m", m.Namespace, m.Timeout)
	}
}
