package azure_test

import (
	"context"
	"testing"
)

// TestListFollowsPages: ARM lists VMs in pages (the face serves two per page), and List reads them all.
func TestListFollowsPages(t *testing.T) {
	w := newWorld(t, "prod")
	for _, n := range []string{"a-1", "b-2", "c-3", "d-4", "e-5"} {
		if _, err := w.p.Create(context.Background(), request("prod", n, onDemand1)); err != nil {
			t.Fatal(err)
		}
	}
	l, err := w.p.List(context.Background(), "prod")
	if err != nil || len(l) != 5 || l[0].ID != "aks-a-1" || l[4].ID != "aks-e-5" {
		t.Fatalf("List = %v, %v; want the 5 VMs", l, err)
	}
}
