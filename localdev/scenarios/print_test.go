package scenarios

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// linesOnce fails for a line (after its [time] prefix) printed twice, and returns how many lines
// contain each of the given substrings.
func linesOnce(t *testing.T, out string, count ...string) map[string]int {
	t.Helper()
	seen := map[string]bool{}
	n := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		_, text, _ := strings.Cut(line, "] ")
		if seen[text] {
			t.Errorf("printed twice: %s", text)
		}
		seen[text] = true
		for _, c := range count {
			if strings.Contains(text, c) {
				n[c]++
			}
		}
	}
	return n
}

// The drift function re-decides every 10 s while a replacement boots and the budget is spent;
// the scenario prints each node's state once: one wait per rolled node (each waited two passes),
// one over-budget line per node that had to wait its turn.
func TestDriftScenarioPrintsEachStateOnce(t *testing.T) {
	var out bytes.Buffer
	if _, err := Drift(context.Background(), &out); err != nil {
		t.Fatal(err)
	}
	n := linesOnce(t, out.String(), "drift: wait", "drift: over-budget", "drift: start")
	if n["drift: wait"] != 4 || n["drift: start"] != 4 || n["drift: over-budget"] != 3 {
		t.Errorf("wait/start/over-budget lines %d/%d/%d, want 4/4/3:\n%s", n["drift: wait"], n["drift: start"], n["drift: over-budget"], out.String())
	}
}

// The notice is redelivered every 5 s while its replacement boots (40 s): one waiting line.
func TestInterruptionScenarioPrintsEachStateOnce(t *testing.T) {
	var out bytes.Buffer
	if _, err := Interruption(context.Background(), &out); err != nil {
		t.Fatal(err)
	}
	if n := linesOnce(t, out.String(), "replacement not ready"); n["replacement not ready"] != 1 {
		t.Errorf("%d waiting lines, want 1:\n%s", n["replacement not ready"], out.String())
	}
}
