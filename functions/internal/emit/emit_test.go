package emit

import (
	"errors"
	"fmt"
	"testing"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/shared/queue"
)

func TestPoisonIfMalformed(t *testing.T) {
	malformed := fmt.Errorf("snapshot: %w", events.ErrMalformed)
	if err := PoisonIfMalformed(malformed); !errors.Is(err, queue.ErrPoison) || !errors.Is(err, events.ErrMalformed) {
		t.Fatalf("a malformed payload must be poison and keep its cause: %v", err)
	}
	version := fmt.Errorf("v9: %w", events.ErrUnsupportedVersion)
	if err := PoisonIfMalformed(version); !errors.Is(err, queue.ErrPoison) {
		t.Fatalf("an unsupported version must be poison: %v", err)
	}
	transient := errors.New("blob store timeout")
	if err := PoisonIfMalformed(transient); errors.Is(err, queue.ErrPoison) {
		t.Fatal("a transient failure must be redelivered, not dead-lettered")
	}
}
