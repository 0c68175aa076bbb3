package emit

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/shared/disruption"
)

// A refused launch stops a voluntary disruption before its taint (nothing is disrupted until
// its replacements exist) and does not stop a forced one (Karpenter v1: expiry and
// interruption do not wait for replacements).
func TestRunSequenceStopsVoluntaryDisruptionsOnARefusedLaunch(t *testing.T) {
	steps := []disruption.SequenceStep{
		{Kind: disruption.SeqLaunch},
		{Kind: disruption.SeqTaint, Commands: []events.Command{{ID: "t", Kind: events.CommandTaintNode}}},
		{Kind: disruption.SeqHandOff, Commands: []events.Command{{ID: "h", Kind: events.CommandDeleteNodeClaim}}},
	}
	ice := errors.New("InsufficientInstanceCapacity")
	refuse := func(context.Context, disruption.SequenceStep) (error, error) { return ice, nil }
	for _, c := range []struct {
		forced    bool
		ran, sent []string
	}{
		{false, nil, nil},
		{true, []string{disruption.SeqLaunch, disruption.SeqTaint, disruption.SeqHandOff}, []string{"t", "h"}},
	} {
		var sent []string
		ran, refused, err := RunSequence(context.Background(), steps, c.forced, refuse, func(_ context.Context, cmd events.Command) error {
			sent = append(sent, cmd.ID)
			return nil
		})
		if err != nil || !errors.Is(refused, ice) || !reflect.DeepEqual(ran, c.ran) || !reflect.DeepEqual(sent, c.sent) {
			t.Errorf("forced %v: ran %v, sent %v, refused %v, err %v; want ran %v, sent %v, refused ICE", c.forced, ran, sent, refused, err, c.ran, c.sent)
		}
	}
	// A publish failure is returned for redelivery, with the steps run before it.
	boom := errors.New("queue down")
	ran, _, err := RunSequence(context.Background(), steps[1:], false, refuse, func(context.Context, events.Command) error { return boom })
	if !errors.Is(err, boom) || len(ran) != 0 {
		t.Errorf("publish failure: ran %v, err %v; want none and the error", ran, err)
	}
}
