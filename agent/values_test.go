package agent

import (
	"errors"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/shared/queue"
)

// Issue 23: a command carrying a value the API server would refuse (here a label value that
// closes shell quotes) is poison at the agent, dead-lettered with the field named, and nothing of
// it is applied to the node.
func TestCommandWithInvalidValuesIsPoisonAndNotApplied(t *testing.T) {
	e := newEnv(t, clock.RealClock{}, 0, 0, -1, testNode("n1"))
	e.waitSynced(t)
	enc, _ := zstd.NewWriter(nil)
	for _, c := range []struct{ name, body, path string }{
		{"LabelNode", `"kind":"LabelNode","nodeName":"n1","labels":{"team":"x' ; touch /pwned ; '"}`, "command.labels[team]"},
		{"TaintNode", `"kind":"TaintNode","nodeName":"n1","taint":{"key":"k","value":"$(reboot)","effect":"NoSchedule"}`, "command.taint.value"},
	} {
		// Encoded by hand: EncodeCommand refuses to write it, as a forged publisher would not.
		raw := enc.EncodeAll([]byte(`{"id":"x","cluster":"`+cluster+`",`+c.body+`}`), nil)
		data, err := events.NewEvent(cluster, "provision", events.TypeCommand, "forged-"+c.name, raw)
		if err != nil {
			t.Fatal(err)
		}
		err = e.agent.HandleCommand(e.ctx, queue.Message{Data: data})
		if !errors.Is(err, queue.ErrPoison) || !strings.Contains(err.Error(), c.path) {
			t.Errorf("%s: %v, want poison naming %s", c.name, err, c.path)
		}
	}
	n, err := e.kube.CoreV1().Nodes().Get(e.ctx, "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := n.Labels["team"]; ok || len(n.Spec.Taints) != 0 {
		t.Errorf("node n1 was changed: labels %v taints %v", n.Labels, n.Spec.Taints)
	}
}
