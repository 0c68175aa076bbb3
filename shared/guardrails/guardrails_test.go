package guardrails

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

var now = time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)

func poolWith(annotations map[string]string) *apisv1.NodePool {
	return &apisv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "gpu", Annotations: annotations}}
}

func ago(d time.Duration, price float64) Added {
	return Added{Created: now.Add(-d), PricePerHour: price}
}

// The window arithmetic, by hand. Claims of the NodePool, created before now:
//
//	 2 min ago  0.50 USD/h
//	 9 min ago  0.50 USD/h
//	10 min ago  1.00 USD/h   (exactly on the 600 s cutoff: not after it, outside the window)
//	50 min ago  2.00 USD/h
//	 2 h ago    4.00 USD/h
//
// Nodes 5 per 600 s: window (now−600 s, now] holds the 2- and 9-minute claims: 2 added, 3 left.
// Nodes 6 per 3600 s: holds 2, 9, 10 and 50 minutes: 4 added, 2 left.
// PricePerHour 10 per 3600 s: 0.50+0.50+1.00+2.00 = 4.00 added, 6.00 left.
// PricePerHour 3 per 600 s: 0.50+0.50 = 1.00 added, 2.00 left.
// Min: nodes min(3, 2) = 2, price min(6, 2) = 2. Max: nodes 3, price 6.
func TestRoomWindowArithmetic(t *testing.T) {
	claims := []Added{ago(2*time.Minute, 0.5), ago(9*time.Minute, 0.5), ago(10*time.Minute, 1), ago(50*time.Minute, 2), ago(2*time.Hour, 4)}
	policies := `policies:
- {type: Nodes, value: 5, periodSeconds: 600}
- {type: Nodes, value: 6, periodSeconds: 3600}
- {type: PricePerHour, value: 10, periodSeconds: 3600}
- {type: PricePerHour, value: 3, periodSeconds: 600}
`
	for _, c := range []struct {
		sel        string
		nodes      int64
		price      float64
		whyN, whyP string
	}{
		{"", 2, 2, "Nodes 6 per 3600s", "PricePerHour 3 per 600s"},
		{"selectPolicy: Min\n", 2, 2, "Nodes 6 per 3600s", "PricePerHour 3 per 600s"},
		{"selectPolicy: Max\n", 3, 6, "Nodes 5 per 600s", "PricePerHour 10 per 3600s"},
	} {
		r, err := ScaleUpRulesOf(poolWith(map[string]string{AnnotationScaleUpPolicies: c.sel + policies}))
		if err != nil {
			t.Fatal(err)
		}
		room := r.Room(now, claims)
		if !room.HasNodes || !room.HasPrice || room.Nodes != c.nodes || room.PricePerHour != c.price {
			t.Errorf("%q: room %+v, want %d nodes and %v USD/h", c.sel, room, c.nodes, c.price)
		}
		if !strings.Contains(room.Why, c.whyN) || !strings.Contains(room.Why, c.whyP) {
			t.Errorf("%q: why %q, want %q and %q", c.sel, room.Why, c.whyN, c.whyP)
		}
	}
	// A policy already overspent leaves nothing, not a negative room: 1 node per 600 s with 2 added.
	r, _ := ScaleUpRulesOf(poolWith(map[string]string{AnnotationScaleUpPolicies: `{"policies":[{"type":"Nodes","value":1,"periodSeconds":600}]}`}))
	if room := r.Room(now, claims); room.Nodes != 0 || !room.HasNodes || room.HasPrice {
		t.Errorf("overspent: %+v, want 0 nodes and no price limit", room)
	}
	// A zero decision time counts every claim: 5 per 600 s with 5 claims leaves 0.
	r, _ = ScaleUpRulesOf(poolWith(map[string]string{AnnotationScaleUpPolicies: `{"policies":[{"type":"Nodes","value":5,"periodSeconds":600}]}`}))
	if room := r.Room(time.Time{}, claims); room.Nodes != 0 {
		t.Errorf("zero time: %+v, want 0 nodes", room)
	}
	// Disabled adds nothing.
	r, _ = ScaleUpRulesOf(poolWith(map[string]string{AnnotationScaleUpPolicies: `selectPolicy: Disabled`}))
	if room := r.Room(now, nil); !room.HasNodes || room.Nodes != 0 || !room.HasPrice || room.PricePerHour != 0 {
		t.Errorf("disabled: %+v", room)
	}
}

func TestScaleUpRulesRefuseBadInput(t *testing.T) {
	for _, c := range []struct{ value, want string }{
		{`policies: [{type: Pods, value: 1, periodSeconds: 60}]`, `policies[0].type: "Pods" is not one of Nodes, PricePerHour`},
		{`policies: [{type: Nodes, value: 1.5, periodSeconds: 60}]`, `policies[0].value: 1.5 is not a whole number of nodes`},
		{`policies: [{type: PricePerHour, value: -1, periodSeconds: 60}]`, `policies[0].value: -1 is not a non-negative number`},
		{`policies: [{type: Nodes, value: 1, periodSeconds: 0}]`, `policies[0].periodSeconds: 0 is not within 1..86400`},
		{`policies: [{type: Nodes, value: 1, periodSeconds: 86401}]`, `policies[0].periodSeconds: 86401 is not within 1..86400`},
		{`selectPolicy: Least`, `selectPolicy: "Least" is not one of Min, Max, Disabled`},
		{`{}`, `policies: at least one policy is required`},
		{`policies: [{type: Nodes, value: 1, periodSecond: 60}]`, `unknown field "periodSecond"`},
		{`[not yaml`, `metadata.annotations[dovetail.dev/scale-up-policies]`},
	} {
		_, err := ScaleUpRulesOf(poolWith(map[string]string{AnnotationScaleUpPolicies: c.value}))
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), AnnotationScaleUpPolicies) {
			t.Errorf("%s: err %v, want it to name the annotation and %q", c.value, err, c.want)
		}
	}
}

func TestAnomalyHoldRefusesBadInput(t *testing.T) {
	for _, c := range []struct{ value, want string }{
		{`multiple: 1`, `multiple: 1 is not a number greater than 1`},
		{`window: 10s`, `window: 10s is not within 1m0s..168h0m0s`},
		{`window: 200h`, `window: 200h0m0s is not within`},
		{`minPricePerHour: -2`, `minPricePerHour: -2 is not a non-negative number`},
		{`timeout: 5s`, `timeout: 5s is shorter than 1m0s`},
		{`window: soon`, `metadata.annotations[dovetail.dev/anomaly-hold]`},
		{`multiplier: 3`, `unknown field "multiplier"`},
	} {
		_, err := AnomalyHoldOf(poolWith(map[string]string{AnnotationAnomalyHold: c.value}))
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), AnnotationAnomalyHold) {
			t.Errorf("%s: err %v, want it to name the annotation and %q", c.value, err, c.want)
		}
	}
	a, err := AnomalyHoldOf(poolWith(map[string]string{AnnotationAnomalyHold: `{}`}))
	if err != nil || a.Multiple != 3 || a.Window.Duration != time.Hour || a.Timeout != nil || a.MinPricePerHour != 0 {
		t.Errorf("defaults: %+v, %v", a, err)
	}
}

// Trailing average over a 1 h window, by hand: a 2 USD/h claim 3 h old counts whole (2.00), a
// 4 USD/h claim 15 min old a quarter (1.00), a 6 USD/h claim created now nothing: 3.00 USD/h.
func TestTrailingAverage(t *testing.T) {
	got := TrailingAverage(now, time.Hour, []Added{ago(3*time.Hour, 2), ago(15*time.Minute, 4), ago(0, 6)})
	if got != 3 {
		t.Errorf("trailing average %v, want 3", got)
	}
}

// A hold's life: a plan raising 2 → 8 USD/h against a 2 USD/h average (8 > 3 × 2) is held with
// a new ID; the next decision keeps the same ID; an approval naming another hold releases
// nothing; the approval naming it releases; the release stands for the window.
func TestAnomalyHoldReleasesOnApproval(t *testing.T) {
	np := poolWith(map[string]string{AnnotationAnomalyHold: `{multiple: 3, window: 1h}`})
	a, err := AnomalyHoldOf(np)
	if err != nil {
		t.Fatal(err)
	}
	s := Spend{Before: 2, After: 8, Trailing: 2, Nodes: 3}
	v := a.Decide(np, s, now)
	if !v.Held || !v.Started || v.HoldID != "hold-1796558400" || v.Condition.Status != metav1.ConditionTrue || v.Condition.Reason != ReasonSpendAnomaly {
		t.Fatalf("first decision: %+v", v)
	}
	for _, want := range []string{"3 new nodes", "from 2.0000 to 8.0000 USD/h", "above 3× its trailing 1h0m0s average of 2.0000 USD/h",
		"kubectl annotate nodepool gpu dovetail.dev/approve-scale-up=hold-1796558400"} {
		if !strings.Contains(v.Condition.Message, want) {
			t.Errorf("message %q lacks %q", v.Condition.Message, want)
		}
	}
	// The agent wrote the condition; a later decision names the same hold.
	np.Status.Conditions = []metav1.Condition{*v.Condition}
	later := now.Add(5 * time.Minute)
	if v := a.Decide(np, s, later); !v.Held || v.Started || v.HoldID != "hold-1796558400" {
		t.Fatalf("later decision: %+v", v)
	}
	np.Annotations[AnnotationApproveScaleUp] = "hold-1"
	if v := a.Decide(np, s, later); !v.Held {
		t.Fatalf("an approval of another hold released it: %+v", v)
	}
	np.Annotations[AnnotationApproveScaleUp] = "hold-1796558400"
	v = a.Decide(np, s, later)
	if v.Held || !v.Released || v.Condition.Status != metav1.ConditionFalse || v.Condition.Reason != ReasonApproved {
		t.Fatalf("approved: %+v", v)
	}
	np.Status.Conditions = []metav1.Condition{*v.Condition}
	// Within the hour after the approval a further step up is not held again...
	if v := a.Decide(np, Spend{Before: 8, After: 30, Trailing: 2.5, Nodes: 5}, later.Add(59*time.Minute)); v.Held || v.Condition != nil {
		t.Fatalf("within the approval's window: %+v", v)
	}
	// ...after it, it is, with a new ID the old approval does not name.
	v = a.Decide(np, Spend{Before: 8, After: 30, Trailing: 8, Nodes: 5}, later.Add(time.Hour))
	if !v.Held || v.HoldID != HoldID(later.Add(time.Hour)) {
		t.Fatalf("after the approval's window: %+v", v)
	}
}

func TestAnomalyHoldTimeoutAndThresholds(t *testing.T) {
	np := poolWith(map[string]string{AnnotationAnomalyHold: `{multiple: 2, minPricePerHour: 5, timeout: 30m}`})
	a, err := AnomalyHoldOf(np)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		s    Spend
		held bool
	}{
		{Spend{Before: 1, After: 5, Trailing: 1, Nodes: 1}, false},  // at the 5 USD/h floor
		{Spend{Before: 1, After: 5.5, Trailing: 1, Nodes: 1}, true}, // above it, above 2 × 1
		{Spend{Before: 4, After: 8, Trailing: 4, Nodes: 1}, false},  // 8 is not above 2 × 4
		{Spend{Before: 4, After: 8.01, Trailing: 4, Nodes: 1}, true},
		{Spend{Before: 9, After: 9, Trailing: 1, Nodes: 0}, false}, // nothing new
	} {
		if v := a.Decide(np, c.s, now); v.Held != c.held {
			t.Errorf("%+v: held %v, want %v", c.s, v.Held, c.held)
		}
	}
	v := a.Decide(np, Spend{Before: 4, After: 9, Trailing: 4, Nodes: 1}, now)
	if !strings.Contains(v.Condition.Message, "released by itself at 2026-12-06T12:30:00Z") {
		t.Errorf("message %q lacks the timeout", v.Condition.Message)
	}
	np.Status.Conditions = []metav1.Condition{*v.Condition}
	if v := a.Decide(np, Spend{Before: 4, After: 9, Trailing: 4, Nodes: 1}, now.Add(29*time.Minute)); !v.Held {
		t.Errorf("released before the timeout: %+v", v)
	}
	v = a.Decide(np, Spend{Before: 4, After: 9, Trailing: 4, Nodes: 1}, now.Add(30*time.Minute))
	if v.Held || v.Condition.Reason != ReasonTimedOut {
		t.Errorf("at the timeout: %+v", v)
	}
	// A hold whose pods went away ends.
	v = a.Decide(np, Spend{Before: 4, After: 4, Trailing: 4}, now.Add(time.Minute))
	if v.Held || !v.Released || v.Condition.Reason != ReasonWithinTrailingAverage {
		t.Errorf("no plan: %+v", v)
	}
}
