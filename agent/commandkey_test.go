package agent

import (
	"testing"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/shared/queue"
)

// CommandKey is the command's OrderingKey, read from the message as HandleCommand reads it; a
// message it cannot read gets "" (HandleCommand dead-letters it).
func TestCommandKey(t *testing.T) {
	msg := func(typ string, payload any) queue.Message {
		data, err := events.NewEvent(cluster, "lifecycle", typ, "m", payload)
		if err != nil {
			t.Fatal(err)
		}
		return queue.Message{Data: data}
	}
	drain := &events.Command{ID: "r", Kind: events.CommandDrainNode, Cluster: cluster, NodeName: "ip-10-0-1-5"}
	if got := CommandKey(msg(events.TypeCommand, drain)); got != "node/ip-10-0-1-5" {
		t.Errorf("drain: key %q, want node/ip-10-0-1-5", got)
	}
	if got := CommandKey(queue.Message{Data: []byte("not an event")}); got != "" {
		t.Errorf("garbage: key %q, want \"\"", got)
	}
}
