package agent

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/dovetail-dev/dovetail/shared/kube"
)

// An unreachable API server is logged when the outage starts, once per UnreachableLogInterval
// while it lasts (not on every probe), and when it answers again; /readyz names it meanwhile.
func TestUnreachableDependencyIsLoggedRateLimitedAndNotReady(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC))
	var logs bytes.Buffer
	var down error = errors.New("dial tcp 10.0.0.1:443: connect: connection refused")
	a, err := New(Config{
		Cluster: cluster, Namespace: "dovetail-system", Kube: fake.NewClientset(),
		Dynamic:   dynamicfake.NewSimpleDynamicClientWithCustomListKinds(k8sruntime.NewScheme(), kube.ListKinds),
		Publisher: discardPublisher{}, Clock: clk,
		Logger:       slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{ReplaceAttr: dropTime})),
		Dependencies: []Dependency{{Name: "kubernetes API server", Check: func(context.Context) error { return down }}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// Probes every 10 s (DefaultProbeInterval) for 80 s: failing until 70 s, answering at 80 s.
	for i := 0; i <= 8; i++ {
		if i == 8 {
			down = nil
		}
		a.probe(ctx)
		if i == 3 {
			want := "informer caches not synced yet; kubernetes API server unreachable for 30s: dial tcp 10.0.0.1:443: connect: connection refused"
			if err := a.Ready(); err == nil || err.Error() != want {
				t.Errorf("Ready at 30 s: %v, want %q", err, want)
			}
		}
		clk.Step(DefaultProbeInterval)
	}
	got := strings.TrimSpace(logs.String())
	want := strings.Join([]string{
		`level=WARN msg="kubernetes API server unreachable; the agent publishes and applies nothing through it until it answers" dependency="kubernetes API server" err="dial tcp 10.0.0.1:443: connect: connection refused"`,
		`level=WARN msg="kubernetes API server still unreachable" dependency="kubernetes API server" for=1m0s err="dial tcp 10.0.0.1:443: connect: connection refused"`,
		`level=INFO msg="kubernetes API server reachable again" dependency="kubernetes API server" after=1m20s`,
	}, "\n")
	if got != want {
		t.Errorf("logs:\n%s\nwant (first failure, one line per minute, recovery):\n%s", got, want)
	}
	if err := a.unreachable(); err != nil {
		t.Errorf("after recovery: %v, want nil", err)
	}
}

func dropTime(_ []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}

// discardPublisher accepts every event (the health test publishes none).
type discardPublisher struct{}

func (discardPublisher) Publish(context.Context, string, string, []byte) error { return nil }
