package manifests

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzLoad: any manifest stream loads, or is refused with an *Error naming where and why (of
// bounded size); nothing panics and no pod set explodes. The seeds are the seed scenario's
// manifests and the inputs that once slipped through (a key given twice, replicas beyond the cap,
// quantities beyond int64, a flood of empty containers).
func FuzzLoad(f *testing.F) {
	for _, name := range []string{"nodepool.yaml", "system-nodes.yaml", "workloads.yaml"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "localdev", "manifests", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{
		"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: a}\nspec:\n  replicas: 1\n  replicas: 2\n",
		"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: a}\nspec: {replicas: 10000000, template: {spec: {containers: [{name: c}]}}}\n",
		"apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, resources: {requests: {cpu: 1e30}}}]}\n",
		"apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{}" + strings.Repeat(", {}", 2000) + "]}\n",
		`{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"List","items":[]}]}`,
		"a: &a [*a, *a]\n", "---\n---\n", "[", "kind: Pod\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := LoadReader("fuzz.yaml", bytes.NewReader(data))
		if err != nil {
			var merr *Error
			if !errors.As(err, &merr) {
				t.Fatalf("LoadReader(%q): %T %v is not a *manifests.Error", data, err, err)
			}
			if len(err.Error()) > 4096 {
				t.Fatalf("LoadReader(%q): an error of %d bytes", data, len(err.Error()))
			}
			return
		}
		if pods := s.ExpandPods(); len(pods) > MaxReplicas*len(s.Workloads)+len(s.Pods) {
			t.Fatalf("LoadReader(%q): %d pods from %d workloads", data, len(pods), len(s.Workloads))
		}
	})
}
