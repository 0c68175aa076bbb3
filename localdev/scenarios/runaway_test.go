package scenarios

import (
	"bytes"
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dovetail-dev/dovetail/shared/quarantine"
)

// TestRunaway: crashy (2 replicas crash-looping for 10 minutes: by the kubelet's back-off,
// restarts at 15 s, 40 s, 85 s, 170 s, 335 s after the start, so 5 restarts, waiting
// CrashLoopBackOff since its exit at 340 s) and web (healthy) are scaled to 200 replicas each.
// web's 198 new pods are all provisioned; crashy gets the allowance, one pod on trial: a trial
// pod needs 85 s of crash-looping to reach 3 restarts and become evidence itself, longer than web
// takes to be bound (launch, 30 s boot, bind), so the provision function plans exactly 1 crashy
// pod, on at most 1 launched node; the Event names the Deployment and the evidence, and the
// NodePool's WorkloadsQuarantined is True. (The scheduler may bind a few more crashy pods to room
// left on web's nodes: printed, not withheld.)
func TestRunaway(t *testing.T) {
	var out bytes.Buffer
	res, err := Runaway(context.Background(), &out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	t.Log("\n" + out.String())
	if res.WebBound != 200 {
		t.Errorf("web: %d of 200 bound", res.WebBound)
	}
	if res.CrashyGiven != 1 || res.CrashyNodes > res.Allowance || res.CrashyPending == 0 {
		t.Errorf("crashy: %d planned, on %d launched nodes, %d on spare room, %d pending; want 1 planned, on at most %d node, the rest waiting",
			res.CrashyGiven, res.CrashyNodes, res.CrashySpare, res.CrashyPending, res.Allowance)
	}
	for _, want := range []string{"Deployment default/crashy is quarantined: 2 of its 2 running pods are sick (2 crash-looping",
		"container app: CrashLoopBackOff, 5 restarts, last exit 1 (Error)"} {
		if !strings.Contains(res.Event, want) {
			t.Errorf("Event %q lacks %q", res.Event, want)
		}
	}
	if c := res.Condition; c == nil || c.Status != metav1.ConditionTrue || c.Reason != quarantine.ReasonSickWorkloads || c.Message != "pending replicas held: Deployment default/crashy" {
		t.Errorf("condition %+v", c)
	}
}
