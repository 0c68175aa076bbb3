package planner

import (
	"github.com/dovetail-dev/dovetail/shared/cloud"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/manifests"
)

// probe is a workload any of the examples' pools may take: three small pods that tolerate every
// taint (a pool's taints are not what this test is about).
const probe = `
apiVersion: apps/v1
kind: Deployment
metadata: {name: probe, namespace: default}
spec:
  replicas: 3
  selector: {matchLabels: {app: probe}}
  template:
    metadata: {labels: {app: probe}}
    spec:
      tolerations: [{operator: Exists}]
      containers:
        - name: app
          image: registry.k8s.io/pause:3.10
          resources: {requests: {cpu: 500m, memory: 512Mi}}
`

// The 22 example manifests of Karpenter v1.14.0 (testdata/karpenter-examples): each plans
// unchanged, or is refused with a reason naming the field Dovetail does not support yet. The
// expected outcome of each file is written by hand from what the file sets.
func TestKarpenterExamples(t *testing.T) {
	refused := map[string]string{} // file → the field the refusal must name (none since Windows nodes launch)
	// Files Karpenter's own CRD refuses: the example writes nodeClassRef.group with a version
	// ("karpenter.k8s.aws/v1"), which the CRD's pattern ^[^/]*$ rejects; Dovetail refuses it at
	// load, naming the field, as the API server would.
	invalid := map[string]string{"windows-custom-userdata.yaml": "spec.template.spec.nodeClassRef.group"}
	dir := "../../testdata/karpenter-examples/v1.14.0"
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) != 22 {
		t.Fatalf("%d example files (%v), want 22", len(files), err)
	}
	cat := catalog.MustAWS()
	probeFile := filepath.Join(t.TempDir(), "probe.yaml")
	if err := os.WriteFile(probeFile, []byte(probe), 0o600); err != nil {
		t.Fatal(err)
	}
	var table []string
	for _, f := range files {
		name := filepath.Base(f)
		set, err := manifests.Load(f, probeFile)
		if want, ok := invalid[name]; ok {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s: load error %v, want one naming %s", name, err, want)
				continue
			}
			table = append(table, "| "+name+" | refused at load (as by Karpenter's CRD): "+err.Error()+" |")
			continue
		}
		if err != nil {
			t.Errorf("%s: does not load: %v", name, err)
			continue
		}
		// The AWS provider's node settings, as dovetail plan passes them (the AMI family decides
		// e.g. a Windows node's os label).
		plan, _, err := Plan(set, cat, cloud.NodeSettingsFor)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if want, ok := refused[name]; ok {
			if len(plan.NodeClaims) != 0 || len(plan.Unschedulable) != 3 || !strings.Contains(plan.Unschedulable[0].Reason, want) {
				t.Errorf("%s: %d NodeClaims, unschedulable %+v; want every pod refused naming %q", name, len(plan.NodeClaims), plan.Unschedulable, want)
				continue
			}
			table = append(table, "| "+name+" | refused: "+plan.Unschedulable[0].Reason+" |")
			continue
		}
		if len(plan.NodeClaims) == 0 || len(plan.Unschedulable) != 0 {
			t.Errorf("%s: %d NodeClaims, unschedulable %+v; want it to plan", name, len(plan.NodeClaims), plan.Unschedulable)
			continue
		}
		types := map[string]bool{}
		for _, nc := range plan.NodeClaims {
			types[nc.Cheapest().InstanceType.Name+" "+nc.Cheapest().CapacityType] = true
		}
		var ts []string
		for k := range types {
			ts = append(ts, k)
		}
		sort.Strings(ts)
		table = append(table, "| "+name+" | plans: "+strings.Join(ts, ", ")+" |")
	}
	t.Logf("Karpenter v1.14.0 examples/v1:\n%s", strings.Join(table, "\n"))
}
