package kube

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

const commitmentsYAML = `savingsPlans:
- name: compute
  type: Compute
  commitmentPerHour: 1.00
  discountRate: 0.30
reservations:
- name: ri-m6i
  instanceType: m6i.xlarge
  region: us-east-1
  count: 2
`

func commitmentsCM(ns, name, data string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: map[string]string{apisv1.CommitmentsKey: data}}
}

// TestWatcherSnapshotsCommitments: the agent reads the commitments ConfigMap of its own
// namespace into the snapshot (and through the codec); a ConfigMap of that name elsewhere is
// not read; an edit bumps the revision and reaches the next snapshot.
func TestWatcherSnapshotsCommitments(t *testing.T) {
	f := newFixture(t, []runtime.Object{
		commitmentsCM(testNamespace, apisv1.CommitmentsConfigMap, commitmentsYAML),
		commitmentsCM("other", apisv1.CommitmentsConfigMap, "reservations: []\n"),
	})
	snap, err := f.builder.Build()
	if err != nil {
		t.Fatal(err)
	}
	c := snap.Commitments
	if c == nil || len(c.SavingsPlans) != 1 || c.SavingsPlans[0].CommitmentPerHour != 1.00 || c.SavingsPlans[0].DiscountRate != 0.30 ||
		len(c.Reservations) != 1 || c.Reservations[0].InstanceType != "m6i.xlarge" || c.Reservations[0].Count != 2 {
		t.Fatalf("snapshot commitments %+v, want the Compute plan and the m6i.xlarge reservation", c)
	}
	enc, err := events.EncodeSnapshot(snap)
	if err != nil {
		t.Fatal(err)
	}
	dec, err := events.DecodeSnapshot(enc)
	if err != nil {
		t.Fatal(err)
	}
	if dec.Commitments == nil || dec.Commitments.Reservations[0].Count != 2 {
		t.Fatalf("decoded commitments %+v", dec.Commitments)
	}
	before := f.watcher.Revisions().Bumps()
	edited := commitmentsCM(testNamespace, apisv1.CommitmentsConfigMap, strings.Replace(commitmentsYAML, "count: 2", "count: 3", 1))
	if _, err := f.kube.CoreV1().ConfigMaps(testNamespace).Update(f.ctx, edited, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a revision for the edit", func() bool { return f.watcher.Revisions().Bumps() > before })
	eventually(t, "the edit in the snapshot", func() bool {
		s, err := f.builder.Build()
		return err == nil && s.Commitments != nil && s.Commitments.Reservations[0].Count == 3
	})
}

// An invalid ConfigMap is refused with the field named, and the snapshot carries no commitments.
func TestCommitmentsConfigMapInvalid(t *testing.T) {
	bad := strings.Replace(commitmentsYAML, "discountRate: 0.30", "discountRate: 1.30", 1)
	_, err := apisv1.CommitmentsFromConfigMap(commitmentsCM(testNamespace, apisv1.CommitmentsConfigMap, bad))
	if err == nil || !strings.Contains(err.Error(), "savingsPlans[0].discountRate: must be in (0, 1), got 1.3") {
		t.Fatalf("error %v, want savingsPlans[0].discountRate named", err)
	}
	_, err = apisv1.CommitmentsFromConfigMap(commitmentsCM(testNamespace, apisv1.CommitmentsConfigMap, commitmentsYAML+"extra: 1\n"))
	if err == nil || !strings.Contains(err.Error(), `unknown field "extra"`) {
		t.Fatalf("error %v, want the unknown field named", err)
	}
	f := newFixture(t, []runtime.Object{commitmentsCM(testNamespace, apisv1.CommitmentsConfigMap, bad)})
	snap, err := f.builder.Build()
	if err != nil {
		t.Fatal(err)
	}
	if snap.Commitments != nil {
		t.Fatalf("invalid ConfigMap shipped %+v", snap.Commitments)
	}
}
