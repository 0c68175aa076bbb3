package localdev

import (
	"bytes"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dovetail-dev/dovetail/functions/provision"
	"github.com/dovetail-dev/dovetail/shared/provisioning"
)

// A pod waiting for its NodeClass to resolve is reported once, as waiting, grouped with the pods
// waiting for the same class; a pod no NodePool can take is still reported as not placeable,
// on every decision (its reason may change).
func TestProgressReportsWaitingPodsOnce(t *testing.T) {
	pod := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}}
	}
	waiting := func(name string) provisioning.Unschedulable {
		return provisioning.Unschedulable{Pod: pod(name), Reason: `nodepool "default": EC2NodeClass default has no status yet`,
			AwaitingNodeClasses: []string{"EC2NodeClass default"}}
	}
	huge := provisioning.Unschedulable{Pod: pod("huge"), Reason: `nodepool "default": no instance type has 512 cpu`}
	var out bytes.Buffer
	p := NewProgress(&out)
	p.Decision(provision.Decision{Revision: 1, Unschedulable: []provisioning.Unschedulable{waiting("web-1"), waiting("web-0"), huge}})
	p.Decision(provision.Decision{Revision: 2, Unschedulable: []provisioning.Unschedulable{waiting("web-0"), waiting("web-1"), waiting("web-2"), huge}})

	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		lines = append(lines, l[strings.Index(l, "] ")+2:]) // drop the elapsed-time prefix
	}
	want := []string{
		"provision (revision 1): 2 pods wait for EC2NodeClass default to resolve (subnets, images, instance profile) before launching: default/web-0, default/web-1",
		`provision (revision 1): pod default/huge cannot be placed: nodepool "default": no instance type has 512 cpu`,
		"provision (revision 2): 1 pod waits for EC2NodeClass default to resolve (subnets, images, instance profile) before launching: default/web-2",
		`provision (revision 2): pod default/huge cannot be placed: nodepool "default": no instance type has 512 cpu`,
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("progress:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
}
