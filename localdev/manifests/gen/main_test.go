package main

import (
	"bytes"
	"os"
	"testing"
)

// The checked-in workloads.yaml must be what the generator makes of the checked-in table.
func TestWorkloadsYAMLUpToDate(t *testing.T) {
	src, err := os.ReadFile("../source/workload_specs.yaml")
	if err != nil {
		t.Fatal(err)
	}
	got, err := Render(src)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("../workloads.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Error("workloads.yaml is stale: run `go run ./gen` in localdev/manifests")
	}
	// Rendering is deterministic (no map-order dependence).
	again, _ := Render(src)
	if !bytes.Equal(got, again) {
		t.Error("two renders differ")
	}
}

func TestRenderRefusesUnknownKind(t *testing.T) {
	src := []byte("workloads:\n- {source: s, kind: DaemonSet, name: x, namespace: null, replicas: 1, containers: [{name: c, requests: {}, limits: {}}]}\n" +
		"- {source: s, kind: Sidecar, name: p, namespace: null, replicas: null, containers: [{name: p, requests: {}, limits: {}}]}\n")
	if _, err := Render(src); err == nil {
		t.Error("want an error for a kind the generator does not render")
	}
}
