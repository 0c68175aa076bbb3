package cloudflags_test

// A function started for a second region against the fake cloud's EC2/Price List face (the real
// aws-sdk-go-v2 clients on loopback): its catalog is that region's, built from the APIs and
// cached in the claim-check store, and the embedded us-east-1 data is never read.

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/spf13/pflag"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake/ec2api"
	"github.com/dovetail-dev/dovetail/shared/runtime"
	"github.com/dovetail-dev/dovetail/shared/runtime/cloudflags"
)

func TestFunctionCatalogOfASecondRegion(t *testing.T) {
	gov, err := catalog.AWSRegionCatalog(catalog.AWSRegionUSGovWest1) // the cloud's own truth
	if err != nil {
		t.Fatal(err)
	}
	srv, err := ec2api.New(ec2api.Options{Cloud: fake.New(fake.Options{Catalog: gov, Cluster: "test"})})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	calls := map[string]int{}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := r.Header.Get("X-Amz-Target")
		if a == "" {
			_ = r.ParseForm()
			a = r.Form.Get("Action")
		}
		mu.Lock()
		calls[a]++
		mu.Unlock()
		srv.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)

	before := catalog.EmbeddedUSEast1Loads()
	blobs := &events.MemoryBlobStore{}
	tr := runtime.Transport{Cluster: "test", Blobs: blobs, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	o := &cloudflags.Options{Cloud: "aws", AWSEndpoint: hs.URL, Region: catalog.AWSRegionUSGovWest1, KubernetesVersion: "1.37",
		EKSEndpoint: "https://example.invalid", EKSCA: "Y2E="}
	env, err := o.Setup(context.Background(), tr)
	if err != nil {
		t.Fatal(err)
	}
	cat := env.Catalog
	if cat.Region != "us-gov-west-1" || cat.Source != catalog.SourceLive {
		t.Fatalf("catalog %s (%s), want us-gov-west-1 live", cat.Region, cat.Source)
	}
	// m5.large: 0.121 USD/h in us-gov-west-1 (the region's published price), in its three zones.
	m5 := cat.Get("m5.large")
	if m5 == nil {
		t.Fatal("no m5.large")
	}
	zones := map[string]bool{}
	for _, off := range m5.Offerings {
		zones[off.Zone] = true
		if off.CapacityType == "on-demand" && off.PricePerHour != 0.121 {
			t.Errorf("m5.large on-demand in %s: %v, want 0.121", off.Zone, off.PricePerHour)
		}
	}
	if len(zones) != 3 {
		t.Errorf("m5.large zones %v, want us-gov-west-1a..c", zones)
	}
	for _, it := range cat.Types() {
		for _, off := range it.Offerings {
			if !strings.HasPrefix(off.Zone, "us-gov-west-1") {
				t.Fatalf("%s offered in %s", it.Name, off.Zone)
			}
		}
	}
	if n := catalog.EmbeddedUSEast1Loads() - before; n != 0 {
		t.Errorf("the function read the embedded us-east-1 catalog %d times", n)
	}
	// A second start within the TTL (another function, a cold Lambda) reads the cached catalog.
	described := calls["DescribeInstanceTypes"]
	env2, err := o.Setup(context.Background(), tr)
	if err != nil {
		t.Fatal(err)
	}
	if calls["DescribeInstanceTypes"] != described || env2.Catalog.Get("m5.large") == nil || len(env2.Catalog.Types()) != len(cat.Types()) {
		t.Errorf("second start: %d more DescribeInstanceTypes calls, %d types; want the cache", calls["DescribeInstanceTypes"]-described, len(env2.Catalog.Types()))
	}
	if blobs.Len() != 1 {
		t.Errorf("%d blobs, want the one cached catalog", blobs.Len())
	}
}

// The governance settings arrive as the stacks pass them (infra/aws: DOVETAIL_* variables, a
// list as "a,b", an empty list as ""), and flags win over them.
func TestGovernanceFromEnvironment(t *testing.T) {
	t.Setenv("DOVETAIL_DISCOVERY_TAG_KEY", "example.com/nodes")
	t.Setenv("DOVETAIL_DISCOVERY_TAG_VALUE", "team-a")
	t.Setenv("DOVETAIL_VPC_ID", "vpc-0abc")
	t.Setenv("DOVETAIL_IMAGE_OWNERS", "444455556666,111122223333")
	t.Setenv("DOVETAIL_AMI_PARAMETER_PATHS", "")
	t.Setenv("DOVETAIL_MANDATORY_TAGS", "Environment, CostCenter")
	fs := pflag.NewFlagSet("fn", pflag.ContinueOnError)
	var o cloudflags.Options
	o.Register(fs)
	if err := fs.Parse([]string{"--vpc-id", "vpc-0flag"}); err != nil {
		t.Fatal(err)
	}
	g := o.Governance
	if g.DiscoveryTagKey != "example.com/nodes" || g.DiscoveryTagValue != "team-a" || g.VPC != "vpc-0flag" ||
		strings.Join(g.ImageOwners, "|") != "444455556666|111122223333" || len(g.AMIParameterPaths) != 0 ||
		strings.Join(g.MandatoryTags, "|") != "Environment|CostCenter" {
		t.Errorf("governance %+v", g)
	}
}
