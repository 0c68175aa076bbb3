package provreq

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

var now = time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)

func req(name, class string, sets ...apisv1.PodSet) apisv1.ProvisioningRequest {
	return apisv1.ProvisioningRequest{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name, UID: "uid-" + "x",
		CreationTimestamp: metav1.NewTime(now.Add(-time.Minute))},
		Spec: apisv1.ProvisioningRequestSpec{ProvisioningClassName: class, PodSets: sets}}
}

func set(template string, n int32) apisv1.PodSet {
	return apisv1.PodSet{PodTemplateRef: apisv1.Reference{Name: template}, Count: n}
}

func template(name string) corev1.PodTemplate {
	return corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}}}
}

func pod(name, consumes, node string) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name}, Spec: corev1.PodSpec{NodeName: node}}
	if consumes != "" {
		p.Annotations = map[string]string{apisv1.AnnotationConsumeProvisioningRequestLegacy: consumes}
	}
	return p
}

// Two pod sets (2 workers, 1 launcher) stand for three pods named request-set-index, each with
// its template's labels and the consume annotation.
func TestPodsOf(t *testing.T) {
	pr := req("job", apisv1.ProvisioningClassCheckCapacity, set("worker", 2), set("launcher", 1))
	tpl := map[string]*corev1.PodTemplate{}
	for _, n := range []string{"worker", "launcher"} {
		x := template(n)
		tpl["ml/"+n] = &x
	}
	pods, err := PodsOf(&pr, tpl)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range pods {
		names = append(names, p.Name)
		if p.Annotations[apisv1.AnnotationConsumeProvisioningRequest] != "job" || p.Namespace != "ml" {
			t.Errorf("%s: annotations %v namespace %s", p.Name, p.Annotations, p.Namespace)
		}
	}
	if want := []string{"job-0-0", "job-0-1", "job-1-0"}; !slices.Equal(names, want) || pods[2].Labels["app"] != "launcher" {
		t.Errorf("pods %v (last labels %v), want %v", names, pods[2].Labels, want)
	}
	delete(tpl, "ml/launcher")
	if _, err := PodsOf(&pr, tpl); err == nil || !strings.Contains(err.Error(), "spec.podSets[1].podTemplateRef.name") {
		t.Errorf("missing template: %v, want an error naming spec.podSets[1].podTemplateRef.name", err)
	}
}

// A booked request's consumers: bound ones use the booking up (3 pods, 1 bound → 2 unconsumed).
func TestRequestsBookings(t *testing.T) {
	booked := req("booked", apisv1.ProvisioningClassCheckCapacity, set("w", 3))
	booked.Status.Conditions = []metav1.Condition{{Type: apisv1.ProvisioningRequestProvisioned, Status: metav1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-time.Minute))}}
	done := req("done", apisv1.ProvisioningClassBestEffortAtomicScaleUp, set("w", 1))
	done.Status.Conditions = []metav1.Condition{{Type: apisv1.ProvisioningRequestFailed, Status: metav1.ConditionTrue}}
	other := req("other", "queued-provisioning.gke.io", set("w", 1))
	snap := &events.Snapshot{Time: metav1.NewTime(now), ProvisioningRequests: []apisv1.ProvisioningRequest{booked, done, other},
		PodTemplates: []corev1.PodTemplate{template("w")},
		Pods:         []corev1.Pod{pod("b-1", "booked", "n1")},
		PendingPods:  []corev1.Pod{pod("b-2", "booked", "")}}
	reqs := Requests(snap)
	if len(reqs) != 2 || reqs[0].State != StateBooked || reqs[1].State != StateDone {
		t.Fatalf("requests %d, states %v %v; want booked Booked, done Done (other's class left out)", len(reqs), reqs[0].State, reqs[1].State)
	}
	if u := reqs[0].Unconsumed(); len(u) != 2 || u[0].Name != "booked-0-1" {
		t.Errorf("unconsumed %d, want 2 from booked-0-1", len(u))
	}
	if c := reqs[0].Consumers; len(c) != 1 || c[0] != "ml/b-2" {
		t.Errorf("consumers %v, want ml/b-2", c)
	}
}

// Every pending pod carrying a consume annotation is held back, whatever its request's state or
// class and whether it exists, as Cluster Autoscaler's ProvisioningRequestPodsFilter
// (processors/provreq pods_filter.go) drops every pod whose annotation is present; each hold
// names the request and what its conditions say.
func TestHoldBack(t *testing.T) {
	booked := req("booked", apisv1.ProvisioningClassCheckCapacity, set("w", 3))
	provisionedAt := now.Add(-time.Minute)
	booked.Status.Conditions = []metav1.Condition{{Type: apisv1.ProvisioningRequestProvisioned, Status: metav1.ConditionTrue, Reason: ReasonCapacityIsFound,
		LastTransitionTime: metav1.NewTime(provisionedAt)}}
	waiting := req("waiting", apisv1.ProvisioningClassBestEffortAtomicScaleUp, set("w", 2))
	waiting.Status.Conditions = []metav1.Condition{{Type: apisv1.ProvisioningRequestAccepted, Status: metav1.ConditionTrue, Reason: ReasonAccepted},
		{Type: apisv1.ProvisioningRequestProvisioned, Status: metav1.ConditionFalse, Reason: ReasonCapacityIsNotFound, Message: "2 of 2 pods fit no NodePool"}}
	done := req("done", apisv1.ProvisioningClassBestEffortAtomicScaleUp, set("w", 1))
	done.Status.Conditions = []metav1.Condition{{Type: apisv1.ProvisioningRequestFailed, Status: metav1.ConditionTrue, Reason: ReasonCapacityIsNotFound, Message: "the cloud refused 3 of 4 nodes"}}
	other := req("other", "queued-provisioning.gke.io", set("w", 1))
	noTemplate := req("no-template", apisv1.ProvisioningClassCheckCapacity, set("gone", 1))
	missing := pod("m-1", "", "")
	missing.Annotations = map[string]string{apisv1.AnnotationConsumeProvisioningRequest: "later", apisv1.AnnotationProvisioningClass: apisv1.ProvisioningClassBestEffortAtomicScaleUp}
	empty := pod("e-1", "", "")
	empty.Annotations = map[string]string{apisv1.AnnotationConsumeProvisioningRequest: ""}
	snap := &events.Snapshot{Time: metav1.NewTime(now), ProvisioningRequests: []apisv1.ProvisioningRequest{booked, waiting, done, other, noTemplate},
		PodTemplates: []corev1.PodTemplate{template("w")},
		PendingPods: []corev1.Pod{pod("b-2", "booked", ""), pod("plain", "", ""), pod("w-1", "waiting", ""), pod("d-1", "done", ""), pod("o-1", "other", ""),
			pod("n-1", "no-template", ""), missing, empty, pod("plain-2", "", "")}}
	pending, held := HoldBack(snap)
	var kept []string
	for _, p := range pending {
		kept = append(kept, p.Name)
	}
	if want := []string{"plain", "plain-2"}; !slices.Equal(kept, want) {
		t.Errorf("pending after hold-back %v, want %v", kept, want)
	}
	want := []struct{ pod, msg string }{
		{"b-2", "consumes ProvisioningRequest ml/booked (check-capacity.autoscaling.x-k8s.io), Provisioned: its capacity is booked until 2026-12-06T12:09:00Z for the kube-scheduler to bind its pods there"},
		{"w-1", "waits for ProvisioningRequest ml/waiting (best-effort-atomic-scale-up.autoscaling.x-k8s.io) to be provisioned (Provisioned=False CapacityIsNotFound: 2 of 2 pods fit no NodePool)"},
		{"d-1", "consumes ProvisioningRequest ml/done (best-effort-atomic-scale-up.autoscaling.x-k8s.io), which is done (Failed=True CapacityIsNotFound: the cloud refused 3 of 4 nodes): nothing more is provisioned for it or its pods"},
		{"o-1", "consumes ProvisioningRequest ml/other (queued-provisioning.gke.io), a class Dovetail does not serve: nothing is provisioned for it or its pods"},
		{"n-1", "consumes ProvisioningRequest ml/no-template (check-capacity.autoscaling.x-k8s.io), which cannot be served: spec.podSets[0].podTemplateRef.name: PodTemplate ml/gone not found"},
		{"m-1", "waits for ProvisioningRequest ml/later (best-effort-atomic-scale-up.autoscaling.x-k8s.io), which is not found: pods that consume a ProvisioningRequest are not provisioned for on their own, as Cluster Autoscaler keeps them out of scale-up"},
		{"e-1", "its consume-provisioning-request annotation names no ProvisioningRequest: pods that consume a ProvisioningRequest are not provisioned for on their own, as Cluster Autoscaler keeps them out of scale-up"},
	}
	if len(held) != len(want) {
		t.Fatalf("held %d pods, want %d", len(held), len(want))
	}
	for i, w := range want {
		if held[i].Pod.Name != w.pod || held[i].Message() != w.msg {
			t.Errorf("hold %d: %s %q\nwant %s %q", i, held[i].Pod.Name, held[i].Message(), w.pod, w.msg)
		}
	}
	// The 10-minute window from Provisioned's transition (12:00 − 1 min + 10 min = 12:09).
	if h := held[0]; !h.Found || !h.Served || h.State != StateBooked || !h.BookedUntil.Time.Equal(provisionedAt.Add(BookingWindow)) {
		t.Errorf("booked hold %+v", h)
	}
	if h := held[5]; h.Found || h.Request != "ml/later" {
		t.Errorf("missing hold %+v, want not found, naming ml/later", h)
	}
	// Without a consumer the snapshot's pending pods are returned as they are.
	snap.PendingPods = []corev1.Pod{pod("plain", "", "")}
	if pending, held := HoldBack(snap); len(pending) != 1 || held != nil {
		t.Errorf("no consumer: %d pending, %d held", len(pending), len(held))
	}
}

// Expiry: 7 days without Provisioned fails the request (Expired); ValidUntilSeconds must be a
// non-negative integer.
func TestExpiryAndParameters(t *testing.T) {
	pr := req("old", apisv1.ProvisioningClassCheckCapacity, set("w", 1))
	pr.CreationTimestamp = metav1.NewTime(now.Add(-ExpiryAge))
	if c := Expire(&pr, now); c == nil || c.Type != apisv1.ProvisioningRequestFailed || c.Reason != ReasonExpired {
		t.Errorf("7 days old: %+v, want Failed Expired", c)
	}
	pr.CreationTimestamp = metav1.NewTime(now.Add(-ExpiryAge + time.Second))
	if c := Expire(&pr, now); c != nil {
		t.Errorf("7 days less a second: %+v, want none", c)
	}
	pr.Spec.Parameters = map[string]apisv1.Parameter{apisv1.ParameterValidUntilSeconds: "90"}
	if u, err := ValidUntil(&pr); err != nil || !u.Equal(pr.CreationTimestamp.Add(90*time.Second)) {
		t.Errorf("ValidUntil %v %v, want creation + 90 s", u, err)
	}
	pr.Spec.Parameters[apisv1.ParameterValidUntilSeconds] = "-1"
	if _, err := ValidUntil(&pr); err == nil || !strings.Contains(err.Error(), "spec.parameters.ValidUntilSeconds") {
		t.Errorf("ValidUntil -1: %v, want an error naming the parameter", err)
	}
}

// Revoked: an atomic request that launched 3 NodeClaims has 1 being deleted and 1 gone.
func TestRevoked(t *testing.T) {
	pr := req("train", apisv1.ProvisioningClassBestEffortAtomicScaleUp, set("w", 3))
	r := &Request{PR: &pr}
	ann := map[string]string{AnnotationProvisioningRequest: "ml/train", AnnotationProvisioningRequestNodes: "3"}
	deleting := metav1.NewTime(now)
	claims := []apisv1.NodeClaim{
		{ObjectMeta: metav1.ObjectMeta{Name: "a", Annotations: ann}},
		{ObjectMeta: metav1.ObjectMeta{Name: "b", Annotations: ann, DeletionTimestamp: &deleting}},
	}
	got := Revoked(r, claims)
	if want := []string{"NodeClaim b is being deleted", "1 of 3 NodeClaims are gone"}; !slices.Equal(got, want) {
		t.Errorf("Revoked %v, want %v", got, want)
	}
	if got := Revoked(r, claims[:1]); len(got) != 1 || got[0] != "2 of 3 NodeClaims are gone" {
		t.Errorf("Revoked %v, want 2 of 3 gone", got)
	}
}

// Holds: a booked check-capacity request holds; an atomic one whose launched NodeClaim is being
// deleted before its pods are all bound does not (CapacityRevoked comes next); once they are
// all bound it holds until its window ends; no request holds past its window. BookedUntil is Provisioned's lastTransitionTime + 10 minutes.
func TestHoldsAndBookedUntil(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	provisioned := metav1.NewTime(now.Add(-3 * time.Minute))
	mk := func(class string) *Request {
		pr := req("job", class, set("worker", 2))
		pr.Status.Conditions = []metav1.Condition{{Type: apisv1.ProvisioningRequestProvisioned, Status: metav1.ConditionTrue, LastTransitionTime: provisioned}}
		return &Request{PR: &pr, State: StateOf(&pr, now), Pods: make([]corev1.Pod, 2)}
	}
	check := mk(apisv1.ProvisioningClassCheckCapacity)
	if !Holds(check, nil) {
		t.Errorf("booked check-capacity request does not hold")
	}
	if got, want := BookedUntil(check.PR), now.Add(7*time.Minute); !got.Equal(want) {
		t.Errorf("BookedUntil %v, want %v", got, want)
	}
	atomic := mk(apisv1.ProvisioningClassBestEffortAtomicScaleUp)
	deleting := metav1.NewTime(now)
	claims := []apisv1.NodeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "nc-1", DeletionTimestamp: &deleting,
		Annotations: map[string]string{AnnotationProvisioningRequest: "ml/job", AnnotationProvisioningRequestNodes: "1"}}}}
	if !Holds(atomic, nil) {
		t.Errorf("atomic request without launched NodeClaims does not hold")
	}
	if Holds(atomic, claims) {
		t.Errorf("atomic request whose NodeClaim is being deleted still holds")
	}
	atomic.Bound = 2
	if !Holds(atomic, claims) {
		t.Errorf("atomic request with every pod bound does not hold")
	}
	expired := mk(apisv1.ProvisioningClassCheckCapacity)
	expired.State = StateOf(expired.PR, now.Add(8*time.Minute))
	if Holds(expired, nil) {
		t.Errorf("request past its window still holds")
	}
}
