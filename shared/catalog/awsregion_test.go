package catalog

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// The embedded second region: us-gov-west-1's published prices (m5.large 0.121 USD/h, c6g.large
// 0.0816 USD/h in the CSV) in its three zones, the region label, spot estimated from them; and
// building it never reads the embedded us-east-1 catalog.
func TestUSGovWest1Catalog(t *testing.T) {
	before := EmbeddedUSEast1Loads()
	c, err := AWSRegionCatalog(AWSRegionUSGovWest1)
	if err != nil {
		t.Fatal(err)
	}
	if EmbeddedUSEast1Loads() != before {
		t.Error("building us-gov-west-1 read the embedded us-east-1 catalog")
	}
	if c.Region != "us-gov-west-1" {
		t.Errorf("region %q", c.Region)
	}
	for _, want := range []struct {
		typ   string
		price float64
	}{{"m5.large", 0.121}, {"c6g.large", 0.0816}} {
		it := c.Get(want.typ)
		if it == nil {
			t.Fatalf("no %s", want.typ)
		}
		if it.Labels[corev1.LabelTopologyRegion] != "us-gov-west-1" {
			t.Errorf("%s region label %q", want.typ, it.Labels[corev1.LabelTopologyRegion])
		}
		zones := map[string]bool{}
		for _, o := range it.Offerings {
			zones[o.Zone] = true
			if o.CapacityType == "on-demand" && o.PricePerHour != want.price {
				t.Errorf("%s on-demand in %s: %v, want %v", want.typ, o.Zone, o.PricePerHour, want.price)
			}
			if o.CapacityType == "spot" && (!o.IsEstimate() || o.PricePerHour >= want.price) {
				t.Errorf("%s spot %+v, want an estimate below on-demand", want.typ, o)
			}
		}
		if len(zones) != 3 || !zones["us-gov-west-1a"] || !zones["us-gov-west-1c"] {
			t.Errorf("%s zones %v, want us-gov-west-1a..c", want.typ, zones)
		}
	}
	priced := 0
	for _, it := range c.Types() {
		if len(it.Offerings) > 0 {
			priced++
		}
	}
	if priced < 600 || priced > 770 {
		t.Errorf("%d priced types, want the types of the data among the 770 priced rows", priced)
	}
	if _, err := AWSRegionCatalog("eu-west-1"); err == nil {
		t.Error("eu-west-1: no error for a region without an embedded catalog")
	}
}
