//go:build e2e

package realcluster

import (
	"context"
	"testing"
	"time"
)

func TestStartStop(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	start := time.Now()
	cp, err := Start(ctx, Options{Logf: t.Logf, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Stop()
	t.Logf("started in %s", time.Since(start))
}
