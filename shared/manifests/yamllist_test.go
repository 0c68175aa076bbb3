package manifests

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	sigsyaml "sigs.k8s.io/yaml"
)

const listYAML = `apiVersion: v1
items:
- apiVersion: v1
  kind: Node
  metadata:
    name: n1
    labels: {kubernetes.io/hostname: n1}
  status:
    allocatable: {cpu: "2", memory: 4Gi, pods: "10"}
# a comment at column 0 inside the items
-   apiVersion: v1
    kind: Pod
    metadata:
      name: p1
      annotations:
        note: |
          items:
          - not an item
    spec:
      nodeName: n1
      containers:
      - name: c
        resources: {requests: {cpu: 100m}}
-
  apiVersion: v1
  kind: Pod
  metadata: {name: p2}
  spec:
    containers: [{name: c}]
kind: List
metadata:
  resourceVersion: ""
`

// The List cut item by item decodes to what the whole document's conversion gives (its JSON
// form goes through decodeList whole).
func TestSplitListDecodesAsWhole(t *testing.T) {
	l := splitList([]byte(listYAML))
	if l == nil || len(l.items) != 3 {
		t.Fatalf("splitList: %+v, want 3 items", l)
	}
	for i := range l.items { // each converts on its own: the whole-document fallback is not taken
		if _, err := sigsyaml.YAMLToJSONStrict(l.item(i)); err != nil {
			t.Fatalf("item %d: %v", i, err)
		}
	}
	if _, err := sigsyaml.YAMLToJSONStrict(l.header); err != nil {
		t.Fatalf("header: %v", err)
	}
	cut, err := LoadReader("dump.yaml", strings.NewReader(listYAML))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := sigsyaml.YAMLToJSONStrict([]byte(listYAML))
	if err != nil {
		t.Fatal(err)
	}
	whole, err := LoadReader("dump.json", strings.NewReader(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	if len(cut.Nodes) != 1 || len(cut.Pods) != 2 {
		t.Fatalf("cut: %d nodes, %d pods, want 1 and 2", len(cut.Nodes), len(cut.Pods))
	}
	if !reflect.DeepEqual(cut.Nodes, whole.Nodes) || !reflect.DeepEqual(cut.Pods, whole.Pods) {
		t.Errorf("the cut List decodes differently from the whole one")
	}
	if got := cut.Pods[0].Annotations["note"]; got != "items:\n- not an item\n" {
		t.Errorf("block scalar: %q", got)
	}
	// The same from a file (the whole-file reader).
	path := filepath.Join(t.TempDir(), "dump.yaml")
	if err := os.WriteFile(path, []byte("---\n"+listYAML+"---\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	file, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(file.Pods, whole.Pods) || !reflect.DeepEqual(file.Nodes, whole.Nodes) {
		t.Errorf("the List read from a file decodes differently")
	}
}

// Documents splitList does not take are converted whole.
func TestSplitListDeclines(t *testing.T) {
	for name, doc := range map[string]string{
		"flow items":   "apiVersion: v1\nkind: List\nitems: []\n",
		"no items":     "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n",
		"indented seq": "apiVersion: v1\nkind: List\nitems:\n  - kind: Pod\n",
		"alias":        "apiVersion: v1\nkind: List\nitems:\n- &a {kind: Pod}\n- *a\n",
		"items twice":  "items:\n- a: 1\nitems:\n- b: 2\n",
	} {
		if l := splitList([]byte(doc)); l != nil {
			t.Errorf("%s: split into %d items, want the whole conversion", name, len(l.items))
		}
	}
}

// An item that is not valid YAML fails as the whole document did: the document's error, not
// the item's.
func TestSplitListItemErrorIsTheWholeDocuments(t *testing.T) {
	doc := "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: p1}\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: p2\n"
	_, wholeErr := sigsyaml.YAMLToJSONStrict([]byte(doc))
	if wholeErr == nil {
		t.Fatal("the document should not convert")
	}
	_, err := LoadReader("dump.yaml", strings.NewReader(doc))
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v, want an *Error", err)
	}
	if e.Source.Item != -1 || !strings.Contains(e.Reason, strings.Join(strings.Fields(wholeErr.Error()), " ")) {
		t.Errorf("error %+v, want the whole document's (%v)", e, wholeErr)
	}
}
