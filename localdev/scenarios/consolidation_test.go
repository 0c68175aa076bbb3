package scenarios

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestConsolidation: six m5.xlarge (0.192 $/h each, 1.152 $/h) hold 24 × 700m; scaled to 6
// pods (4.2 vCPU) the cluster needs about 4.2 vCPU of the 3.92 allocatable an m5.xlarge has,
// so at least two nodes stay but four can go: $/h must fall to at most half, with all 6 pods
// still running.
func TestConsolidation(t *testing.T) {
	var out bytes.Buffer
	res, err := Consolidation(context.Background(), &out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	t.Log("\n" + out.String())
	if res.PodsAfter != res.PodsBefore {
		t.Errorf("%d pods before, %d after", res.PodsBefore, res.PodsAfter)
	}
	if res.Before < 1.152-1e-9 || res.After > res.Before/2 {
		t.Errorf("$/h %.4f -> %.4f, want at most half", res.Before, res.After)
	}
	if !strings.Contains(out.String(), "why:") {
		t.Errorf("output does not say why")
	}
}
