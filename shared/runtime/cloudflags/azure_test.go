package cloudflags_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/dovetail-dev/dovetail/shared/runtime"
	"github.com/dovetail-dev/dovetail/shared/runtime/cloudflags"
)

// --cloud azure: the flags reach the Azure provider, which names every setting a deployment left
// out (without a subscription the catalog is the region's embedded one, so nothing is called).
func TestAzureFlags(t *testing.T) {
	tr := runtime.Transport{Cluster: "test", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	var o cloudflags.Options
	fs := pflag.NewFlagSet("f", pflag.ContinueOnError)
	o.Register(fs)
	if err := fs.Parse([]string{"--cloud", "azure", "--region", "westeurope"}); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Setup(context.Background(), tr); err == nil || !strings.Contains(err.Error(), "Options.Bootstrap.APIServer, Options.Bootstrap.CA, Options.Bootstrap.TenantID, Options.Bootstrap.Token, Options.ResourceGroup, Options.SSHPublicKey, Options.SubscriptionID required") {
		t.Fatalf("missing settings: %v", err)
	}
}

// --aks-provision-mode (DOVETAIL_AKS_PROVISION_MODE) reaches the provider: bootstrappingclient
// without its server names each flag it needs.
func TestAzureProvisionModeFlag(t *testing.T) {
	t.Setenv("DOVETAIL_AKS_PROVISION_MODE", "bootstrappingclient")
	tr := runtime.Transport{Cluster: "test", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	var o cloudflags.Options
	fs := pflag.NewFlagSet("f", pflag.ContinueOnError)
	o.Register(fs)
	if err := fs.Parse([]string{"--cloud", "azure", "--aks-cluster-resource-group", "rg-aks"}); err != nil {
		t.Fatal(err)
	}
	if o.AKSProvisionMode != "bootstrappingclient" {
		t.Fatalf("mode %q from the environment", o.AKSProvisionMode)
	}
	if _, err := o.Setup(context.Background(), tr); err == nil || !strings.Contains(err.Error(), "provision mode bootstrappingclient requires --aks-nodebootstrapping-server-url, --azure-subscription-id") {
		t.Fatalf("bootstrappingclient without its server: %v", err)
	}
}
