package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Issue 23: a NodePool label value that would close the AL2 bootstrap script's quotes is refused
// when the manifests are loaded, with the file, the document and the field named; so is the same
// value on a Node of a cluster dump.
func TestPlanRefusesValuesTheAPIServerWould(t *testing.T) {
	dir := t.TempDir()
	pool := filepath.Join(dir, "pool.yaml")
	if err := os.WriteFile(pool, []byte(`apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: web}
spec:
  template:
    metadata:
      labels: {team: "x' ; touch /pwned ; '"}
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := runCLI(t, "plan", "-f", pool, "--output", "json")
	if code != exitInvalidInput || out != "" || !strings.Contains(stderr, "pool.yaml doc 0: NodePool web") ||
		!strings.Contains(stderr, "spec.template.metadata.labels[team]") {
		t.Errorf("exit %d, stdout %q, stderr %q; want exit %d naming the file, the NodePool and the label", code, out, stderr, exitInvalidInput)
	}

	raw, err := os.ReadFile(liveDump)
	if err != nil {
		t.Fatal(err)
	}
	// The first node's karpenter.sh/nodepool label (the first such line of the dump).
	dump := filepath.Join(dir, "dump.yaml")
	if err := os.WriteFile(dump, []byte(strings.Replace(string(raw), "karpenter.sh/nodepool: default", `karpenter.sh/nodepool: "default;reboot"`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = runCLI(t, "plan", "-f", dump, "--at", liveAt)
	if code != exitInvalidInput || !strings.Contains(stderr, "dump.yaml doc 0 items[0]: Node ip-10-0-1-10.ec2.internal: metadata.labels[karpenter.sh/nodepool]") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
}
