package emit

import (
	"context"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/shared/disruption"
)

// Launch carries out a disruption sequence's SeqLaunch step (the function's launch.Step). It
// returns refused, the first launch the cloud refused for capacity (nil when all launched), and
// err for a failure that asks for redelivery.
type Launch func(ctx context.Context, step disruption.SequenceStep) (refused error, err error)

// RunSequence carries out the steps disruption.Sequence made, in their order: launch runs the
// SeqLaunch step, publish sends every other step's commands. A refused launch stops a voluntary
// disruption before anything is tainted (its nodes keep running and a later snapshot tries
// again) and RunSequence returns it as refused; a forced one (expiry, interruption) goes on, as
// Karpenter's forceful disruption does not wait for its replacements. It returns the kinds of
// the steps it ran.
func RunSequence(ctx context.Context, steps []disruption.SequenceStep, forced bool, launch Launch,
	publish func(context.Context, events.Command) error) (ran []string, refused, err error) {
	for _, s := range steps {
		if s.Kind == disruption.SeqLaunch {
			r, err := launch(ctx, s)
			if err != nil {
				return ran, nil, err
			}
			if r != nil {
				refused = r
				if !forced {
					return ran, refused, nil
				}
			}
			ran = append(ran, s.Kind)
			continue
		}
		for _, c := range s.Commands {
			if err := publish(ctx, c); err != nil {
				return ran, refused, err
			}
		}
		ran = append(ran, s.Kind)
	}
	return ran, refused, nil
}
