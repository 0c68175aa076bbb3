// Package cloudflags holds the cloud-provider flags every function binary shares (--cloud, one of
// the clouds in shared/cloud/registry, and the AWS provider's settings) and builds the
// cloud.Provider they select. Each flag also reads its environment variable (runtime.EnvName:
// --cloud → DOVETAIL_CLOUD), which is how Lambda passes them.
package cloudflags

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/catalog/awsrefresh"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	"github.com/dovetail-dev/dovetail/shared/cloud/registry"
	"github.com/dovetail-dev/dovetail/shared/provisioning"
	"github.com/dovetail-dev/dovetail/shared/runtime"
)

// Options are the flags' values.
type Options struct {
	Cloud, AWSEndpoint, Region                                  string
	EKSName, EKSEndpoint, EKSCA, ServiceCIDR, KubernetesVersion string
}

// Register adds the flags to fs, with their environment variables as defaults.
func (o *Options) Register(fs *pflag.FlagSet) {
	fs.StringVar(&o.Cloud, "cloud", runtime.EnvDefault("cloud", registry.Fake), "cloud provider: "+strings.Join(registry.Names(), ", ")+" (fake: in-memory, local dev; aws: EC2); env "+runtime.EnvName("cloud"))
	fs.StringVar(&o.AWSEndpoint, "aws-endpoint", runtime.EnvDefault("aws-endpoint", ""), "aws: EC2/SSM endpoint URL (a local endpoint); empty: the real AWS endpoints")
	fs.StringVar(&o.Region, "region", runtime.EnvDefault("region", ""), "region whose catalog the function decides with; aws: empty is the SDK's default (AWS_REGION), the catalog is refreshed from the EC2 and Price List APIs; fake: an embedded region ("+strings.Join(catalog.EmbeddedRegions, ", ")+"), empty is us-east-1")
	fs.StringVar(&o.EKSName, "eks-cluster-name", runtime.EnvDefault("eks-cluster-name", ""), "aws: EKS cluster name nodes join; empty: --cluster")
	fs.StringVar(&o.EKSEndpoint, "eks-endpoint", runtime.EnvDefault("eks-endpoint", ""), "aws: EKS API server URL nodes join")
	fs.StringVar(&o.EKSCA, "eks-ca", runtime.EnvDefault("eks-ca", ""), "aws: EKS cluster CA bundle (base64)")
	fs.StringVar(&o.ServiceCIDR, "service-cidr", runtime.EnvDefault("service-cidr", ""), "aws: cluster service CIDR; empty: the provider's default")
	fs.StringVar(&o.KubernetesVersion, "kubernetes-version", runtime.EnvDefault("kubernetes-version", ""), "aws: Kubernetes minor version (1.31) for AMI aliases")
}

// Env is what a function's Build starts with: the selected cloud's catalog, its NodeClass →
// node settings rule and its provider.
type Env struct {
	Catalog      *catalog.Catalog
	NodeSettings provisioning.NodeSettingsFunc
	Provider     cloud.Provider
}

// Setup looks the selected cloud up in the registry, builds the catalog of the region (the
// fake: embedded; aws: from the APIs, cached in the claim-check store) and the provider on it. The fake cloud's instances boot on its own clock, which runs (every 100 ms,
// until ctx ends) only in NATS mode: a Lambda invocation is too short-lived to drive it. An
// unknown --cloud is an error naming the flag.
func (o *Options) Setup(ctx context.Context, t runtime.Transport) (Env, error) {
	c, err := registry.Lookup(o.Cloud)
	if err != nil {
		return Env{}, fmt.Errorf("--cloud (%s) %w", runtime.EnvName("cloud"), err)
	}
	cfg := registry.Config{Cluster: t.Cluster, Logger: t.Logger, DriveClock: t.Mode == runtime.ModeNATS,
		AWS: registry.AWSConfig{Endpoint: o.AWSEndpoint, Region: o.Region, EKSName: o.EKSName, EKSEndpoint: o.EKSEndpoint,
			EKSCA: o.EKSCA, ServiceCIDR: o.ServiceCIDR, KubernetesVersion: o.KubernetesVersion}}
	if s, ok := t.Blobs.(awsrefresh.Store); ok {
		cfg.Blobs = s
	}
	cat, err := c.FunctionCatalog(ctx, cfg)
	if err != nil {
		return Env{}, fmt.Errorf("catalog: %w", err)
	}
	cfg.Catalog = cat
	p, err := c.New(ctx, cfg)
	if err != nil {
		return Env{}, err
	}
	return Env{Catalog: cat, NodeSettings: c.NodeSettings, Provider: p}, nil
}
