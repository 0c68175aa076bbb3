package events

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// pwned is issue 23's NodePool label value: it closes the AL2 bootstrap script's single quotes
// and runs a command as root. The API server refuses it (not a label value), so must every entry.
const pwned = "x' ; touch /pwned ; '"

// rawSnapshot encodes s without EncodeSnapshot's validation: what a forged or buggy publisher
// could put on the queue.
func rawSnapshot(t *testing.T, s *Snapshot) []byte {
	t.Helper()
	b, err := encodePayload(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestSnapshotValuesRefusedWithTheirPath(t *testing.T) {
	cases := []struct {
		name string
		edit func(s *Snapshot)
		path string
	}{
		{"NodePool template label", func(s *Snapshot) {
			s.NodePools = []apisv1.NodePool{{ObjectMeta: metav1.ObjectMeta{Name: "default"}}}
			s.NodePools[0].Spec.Template.ObjectMeta.Labels = map[string]string{"team": pwned}
		}, "snapshot.nodePools[0].spec.template.metadata.labels[team]"},
		{"NodePool taint value", func(s *Snapshot) {
			s.NodePools = []apisv1.NodePool{{ObjectMeta: metav1.ObjectMeta{Name: "default"}}}
			s.NodePools[0].Spec.Template.Spec.Taints = []corev1.Taint{{Key: "k", Value: "$(reboot)", Effect: corev1.TaintEffectNoSchedule}}
		}, "snapshot.nodePools[0].spec.template.spec.taints[0].value"},
		{"NodePool requirement value", func(s *Snapshot) {
			s.NodePools = []apisv1.NodePool{{ObjectMeta: metav1.ObjectMeta{Name: "default"}}}
			s.NodePools[0].Spec.Template.Spec.Requirements = []apisv1.NodeSelectorRequirementWithMinValues{{NodeSelectorRequirement: corev1.NodeSelectorRequirement{
				Key: "team", Operator: corev1.NodeSelectorOpIn, Values: []string{"a\nb"}}}}
		}, "snapshot.nodePools[0].spec.template.spec.requirements[0].values[0]"},
		{"NodeClaim label", func(s *Snapshot) {
			s.NodeClaims = []apisv1.NodeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "default-x1", Labels: map[string]string{"team": "`id`"}}}}
		}, "snapshot.nodeClaims[0].metadata.labels[team]"},
		{"Node name", func(s *Snapshot) { s.Nodes[0].Name = "Node_1" }, "snapshot.nodes[0].metadata.name"},
		{"Node taint effect", func(s *Snapshot) {
			s.Nodes[0].Spec.Taints = []corev1.Taint{{Key: "k", Effect: "Sometimes"}}
		}, "snapshot.nodes[0].spec.taints[0].effect"},
		{"pending pod nodeSelector", func(s *Snapshot) {
			s.PendingPods[0].Spec.NodeSelector = map[string]string{"team": pwned}
		}, "snapshot.pendingPods[0].spec.nodeSelector[team]"},
		{"bound pod toleration", func(s *Snapshot) {
			s.Pods[0].Spec.Tolerations = []corev1.Toleration{{Key: "k", Operator: "Like"}}
		}, "snapshot.pods[0].spec.tolerations[0].operator"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := testSnapshot(1, 1, 1)
			c.edit(s)
			if _, err := EncodeSnapshot(s); err == nil || !strings.Contains(err.Error(), c.path+": ") {
				t.Errorf("EncodeSnapshot err = %v, want one at %s", err, c.path)
			}
			// From the queue: the decoder refuses it as malformed (poison, dead-lettered with
			// this reason), naming the object and the field.
			_, err := DecodeSnapshot(rawSnapshot(t, s))
			if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), c.path+": ") {
				t.Fatalf("DecodeSnapshot err = %v, want ErrMalformed at %s", err, c.path)
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Path != c.path {
				t.Errorf("first FieldError = %+v, want path %s", fe, c.path)
			}
		})
	}
	if err := testSnapshot(3, 2, 2).Validate(); err != nil {
		t.Errorf("a valid snapshot is refused: %v", err)
	}
}

func TestCommandValuesRefusedWithTheirPath(t *testing.T) {
	nc := func(edit func(*apisv1.NodeClaim)) *apisv1.NodeClaim {
		n := &apisv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-x1"}}
		n.Status.ProviderID = "aws:///us-east-1a/i-0123456789abcdef0"
		edit(n)
		return n
	}
	base := Command{ID: "c", Cluster: "prod"}
	cases := []struct {
		name string
		cmd  func(c *Command)
		path string
	}{
		{"LabelNode value", func(c *Command) {
			c.Kind, c.NodeName, c.Labels = CommandLabelNode, "n1", map[string]string{"team": pwned}
		}, "command.labels[team]"},
		{"LabelNode key", func(c *Command) {
			c.Kind, c.NodeName, c.Labels = CommandLabelNode, "n1", map[string]string{"a;b": "v"}
		}, "command.labels[a;b]"},
		{"TaintNode value", func(c *Command) {
			c.Kind, c.NodeName, c.Taint = CommandTaintNode, "n1", &corev1.Taint{Key: "k", Value: pwned, Effect: corev1.TaintEffectNoSchedule}
		}, "command.taint.value"},
		{"TaintNode key", func(c *Command) {
			c.Kind, c.NodeName, c.Taint = CommandTaintNode, "n1", &corev1.Taint{Key: "k k", Effect: corev1.TaintEffectNoSchedule}
		}, "command.taint.key"},
		{"UntaintNode effect", func(c *Command) {
			c.Kind, c.NodeName, c.Taint = CommandUntaintNode, "n1", &corev1.Taint{Key: "k", Effect: "Later"}
		}, "command.taint.effect"},
		{"DeleteNode name", func(c *Command) { c.Kind, c.NodeName = CommandDeleteNode, "../n1" }, "command.nodeName"},
		{"CreateNodeClaim label", func(c *Command) {
			c.Kind, c.NodeClaim = CommandCreateNodeClaim, nc(func(n *apisv1.NodeClaim) { n.Labels = map[string]string{"team": pwned} })
		}, "command.nodeClaim.metadata.labels[team]"},
		{"CreateNodeClaim taint", func(c *Command) {
			c.Kind, c.NodeClaim = CommandCreateNodeClaim, nc(func(n *apisv1.NodeClaim) {
				n.Spec.Taints = []corev1.Taint{{Key: "k", Value: "a\nb", Effect: corev1.TaintEffectNoSchedule}}
			})
		}, "command.nodeClaim.spec.taints[0].value"},
		{"CreateNodeClaim requirement", func(c *Command) {
			c.Kind, c.NodeClaim = CommandCreateNodeClaim, nc(func(n *apisv1.NodeClaim) {
				n.Spec.Requirements = []apisv1.NodeSelectorRequirementWithMinValues{{NodeSelectorRequirement: corev1.NodeSelectorRequirement{
					Key: "team", Operator: corev1.NodeSelectorOpIn, Values: []string{"$(id)"}}}}
			})
		}, "command.nodeClaim.spec.requirements[0].values[0]"},
		{"RegisterNode taints", func(c *Command) {
			c.Kind, c.NodeName, c.Finalizer = CommandRegisterNode, "n1", "karpenter.sh/termination"
			c.NodeClaim = nc(func(*apisv1.NodeClaim) {})
			c.Taints = []corev1.Taint{{Key: "k", Value: "'", Effect: corev1.TaintEffectNoSchedule}}
		}, "command.taints[0].value"},
		{"RegisterNode annotation key", func(c *Command) {
			c.Kind, c.NodeName, c.Finalizer = CommandRegisterNode, "n1", "karpenter.sh/termination"
			c.NodeClaim = nc(func(*apisv1.NodeClaim) {})
			c.Annotations = map[string]string{"bad key": "v"}
		}, "command.annotations"},
		{"RemoveFinalizer name", func(c *Command) {
			c.Kind, c.NodeName, c.Finalizer = CommandRemoveFinalizer, "n1", "karpenter.sh/termination; rm"
		}, "command.finalizer"},
		{"NominatePods toleration", func(c *Command) {
			c.Kind, c.NodeName, c.Pods = CommandNominatePods, "n1", []PodRef{{Namespace: "default", Name: "p"}}
			c.Toleration = &corev1.Toleration{Key: "dovetail.dev/planned", Value: "a b"}
		}, "command.toleration.value"},
		{"NominatePods naming a node and a NodeClaim", func(c *Command) {
			c.Kind, c.NodeName, c.Pods = CommandNominatePods, "n1", []PodRef{{Namespace: "default", Name: "p"}}
			c.NodeClaim = nc(func(*apisv1.NodeClaim) {})
		}, "command.nodeClaim"},
		{"NominatePods naming a NodeClaim without a name", func(c *Command) {
			c.Kind, c.Pods = CommandNominatePods, []PodRef{{Namespace: "default", Name: "p"}}
			c.NodeClaim = &apisv1.NodeClaim{}
		}, "command.nodeClaim.metadata.name"},
		{"DeletePods namespace", func(c *Command) {
			c.Kind, c.NodeName, c.Pods = CommandDeletePods, "n1", []PodRef{{Namespace: "Default", Name: "p"}}
		}, "command.pods[0].namespace"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := base
			tc.cmd(&c)
			if _, err := EncodeCommand(&c); err == nil || !strings.Contains(err.Error(), tc.path+": ") {
				t.Errorf("EncodeCommand err = %v, want one at %s", err, tc.path)
			}
			raw, err := encodePayload(&c)
			if err != nil {
				t.Fatal(err)
			}
			_, err = DecodeCommand(raw)
			if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tc.path+": ") {
				t.Errorf("DecodeCommand err = %v, want ErrMalformed at %s", err, tc.path)
			}
		})
	}
}
