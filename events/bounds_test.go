package events

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/dovetail-dev/dovetail/shared/boundedjson"
)

// repetitiveSnapshot is the most repetitive real shape: every pod from one Deployment's template
// (only names, UIDs and nodes differ), nodes alike but for their names.
func repetitiveSnapshot(nodes, perNode int) *Snapshot {
	s := testSnapshot(nodes, perNode, 0)
	tmpl := s.Pods[0]
	for i := range s.Pods {
		p := tmpl
		p.ObjectMeta = *tmpl.ObjectMeta.DeepCopy()
		p.Name = fmt.Sprintf("web-7d9f8b6c5-%05d", i)
		p.UID = s.Pods[i].UID
		p.Spec.NodeName = s.Pods[i].Spec.NodeName
		s.Pods[i] = p
	}
	return s
}

// Real snapshots stay well inside the bounds, so the bounds refuse only what no cluster sends:
// their compression ratio below MaxExpansion and their estimated objects per compressed byte
// below MaxObjectBytesPerInputByte, each with at least 15 % to spare.
func TestRealSnapshotsFitTheBounds(t *testing.T) {
	for _, c := range []struct {
		name string
		s    *Snapshot
	}{{"1,000 nodes × 30 varied pods", testSnapshot(1000, 30, 100)}, {"500 nodes × 30 pods of one Deployment", repetitiveSnapshot(500, 30)}} {
		raw, err := json.Marshal(c.s)
		if err != nil {
			t.Fatal(err)
		}
		enc, err := EncodeSnapshot(c.s)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := boundedjson.Check(raw, reflect.TypeFor[Snapshot](), Limits(len(enc)))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		ratio := float64(len(raw)) / float64(len(enc))
		perByte := float64(rep.Bytes) / float64(len(enc))
		t.Logf("%s: JSON %d B, zstd %d B (%.1f:1), estimated objects %d B (%.1f × JSON, %.0f per compressed byte)",
			c.name, len(raw), len(enc), ratio, rep.Bytes, float64(rep.Bytes)/float64(len(raw)), perByte)
		if ratio*1.15 > MaxExpansion {
			t.Errorf("%s: compresses %.1f:1, too close to MaxExpansion %d", c.name, ratio, MaxExpansion)
		}
		if perByte*1.15 > MaxObjectBytesPerInputByte {
			t.Errorf("%s: %.0f object bytes per input byte, too close to %d", c.name, perByte, MaxObjectBytesPerInputByte)
		}
		if _, err := DecodeSnapshot(enc); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

// Object counts are checked before decoding and name the field and the limit.
func TestObjectCountCaps(t *testing.T) {
	for _, c := range []struct {
		name, json, want string
	}{
		{"nodes", `{"nodes":[{}` + repeatString(`,{}`, MaxNodes) + `]}`, "nodes[5000]: more than 5000 nodes"},
		{"pods and pending pods together", `{"pods":[{}` + repeatString(`,{}`, MaxPods/2) + `],"pendingPods":[{}` + repeatString(`,{}`, MaxPods/2) + `]}`,
			"pendingPods[74999]: more than 150000 pods"},
		{"containers across pods", `{"pods":[{"spec":{"containers":[{}` + repeatString(`,{}`, MaxContainers/2) + `]}},{"spec":{"initContainers":[{}` +
			repeatString(`,{}`, MaxContainers/2) + `]}}]}`, "pods[1].spec.initContainers[149999]: more than 300000 containers"},
	} {
		_, err := boundedjson.Check([]byte(c.json), reflect.TypeFor[Snapshot](), boundedjson.Limits{Caps: Caps})
		if !errors.Is(err, boundedjson.ErrLimit) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want %q", c.name, err, c.want)
		}
	}
}

func repeatString(s string, n int) string {
	b := make([]byte, 0, len(s)*n)
	for range n {
		b = append(b, s...)
	}
	return string(b)
}
