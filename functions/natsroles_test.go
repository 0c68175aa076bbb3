package functions_test

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/dovetail-dev/dovetail/functions/consolidate"
	"github.com/dovetail-dev/dovetail/functions/drift"
	"github.com/dovetail-dev/dovetail/functions/interruption"
	"github.com/dovetail-dev/dovetail/functions/lifecycle"
	"github.com/dovetail-dev/dovetail/functions/provision"
	"github.com/dovetail-dev/dovetail/shared/queue"
	"github.com/dovetail-dev/dovetail/shared/queue/nats/natsauth"
)

// The NATS function role admits exactly the functions there are: each function main's durable
// (its Component) with the subject it consumes. A function missing from natsauth.FunctionDurables
// would be refused its consumer by every server configured from the table.
func TestFunctionDurablesAreTheFunctions(t *testing.T) {
	mains, err := filepath.Glob("*/cmd/*")
	if err != nil {
		t.Fatal(err)
	}
	var dirs, durables []string
	for _, m := range mains {
		dirs = append(dirs, filepath.Base(m))
	}
	subjects := map[string]string{}
	for _, d := range natsauth.FunctionDurables {
		durables = append(durables, d.Name)
		subjects[d.Name] = "dovetail.c." + d.Subject
	}
	slices.Sort(dirs)
	slices.Sort(durables)
	if !slices.Equal(dirs, durables) {
		t.Errorf("function mains %v, natsauth.FunctionDurables %v", dirs, durables)
	}
	// Each main's runtime.Function: Name is the package's Component, Subject its consumed
	// subject (interruption: notices; the rest the default, events).
	for name, subject := range map[string]string{
		provision.Component: queue.EventsSubject("c"), consolidate.Component: queue.EventsSubject("c"),
		drift.Component: queue.EventsSubject("c"), lifecycle.Component: queue.EventsSubject("c"),
		interruption.Component: interruption.NoticesSubject("c"),
	} {
		if subjects[name] != subject {
			t.Errorf("durable %s reads %q in natsauth, %q in its main", name, subjects[name], subject)
		}
	}
}
