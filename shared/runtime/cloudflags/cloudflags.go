// Package cloudflags holds the cloud-provider flags every function binary shares (--cloud fake|aws
// and the AWS provider's settings) and builds the cloud.Provider they select. Each flag also reads
// its environment variable (runtime.EnvName: --cloud → DOVETAIL_CLOUD), which is how Lambda
// passes them.
package cloudflags

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	dvaws "github.com/dovetail-dev/dovetail/shared/cloud/aws"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake"
	"github.com/dovetail-dev/dovetail/shared/runtime"
)

// Providers --cloud accepts.
const (
	// Fake is the in-memory cloud over the catalog (local dev; one per process).
	Fake = "fake"
	// AWS is EC2 through aws-sdk-go-v2 (shared/cloud/aws).
	AWS = "aws"
)

// Options are the flags' values.
type Options struct {
	Cloud, AWSEndpoint, Region                                  string
	EKSName, EKSEndpoint, EKSCA, ServiceCIDR, KubernetesVersion string
}

// Register adds the flags to fs, with their environment variables as defaults.
func (o *Options) Register(fs *pflag.FlagSet) {
	fs.StringVar(&o.Cloud, "cloud", runtime.EnvDefault("cloud", Fake), "cloud provider: fake (in-memory, local dev) or aws (EC2); env "+runtime.EnvName("cloud"))
	fs.StringVar(&o.AWSEndpoint, "aws-endpoint", runtime.EnvDefault("aws-endpoint", ""), "aws: EC2/SSM endpoint URL (a local endpoint); empty: the real AWS endpoints")
	fs.StringVar(&o.Region, "region", runtime.EnvDefault("region", ""), "aws: region; empty: the SDK's default (AWS_REGION)")
	fs.StringVar(&o.EKSName, "eks-cluster-name", runtime.EnvDefault("eks-cluster-name", ""), "aws: EKS cluster name nodes join; empty: --cluster")
	fs.StringVar(&o.EKSEndpoint, "eks-endpoint", runtime.EnvDefault("eks-endpoint", ""), "aws: EKS API server URL nodes join")
	fs.StringVar(&o.EKSCA, "eks-ca", runtime.EnvDefault("eks-ca", ""), "aws: EKS cluster CA bundle (base64)")
	fs.StringVar(&o.ServiceCIDR, "service-cidr", runtime.EnvDefault("service-cidr", ""), "aws: cluster service CIDR; empty: the provider's default")
	fs.StringVar(&o.KubernetesVersion, "kubernetes-version", runtime.EnvDefault("kubernetes-version", ""), "aws: Kubernetes minor version (1.31) for AMI aliases")
}

// Setup loads the embedded AWS catalog and builds the selected provider on it: what every
// function's Build starts with.
func (o *Options) Setup(ctx context.Context, t runtime.Transport) (*catalog.Catalog, cloud.Provider, error) {
	cat, err := catalog.AWS()
	if err != nil {
		return nil, nil, fmt.Errorf("catalog: %w", err)
	}
	p, err := o.Provider(ctx, t, cat)
	if err != nil {
		return nil, nil, err
	}
	return cat, p, nil
}

// Provider builds the selected provider for the transport's cluster. The fake cloud's instances
// boot on its own clock, which runs (every 100 ms, until ctx ends) only in NATS mode: a Lambda
// invocation is too short-lived to drive it. An unknown --cloud is an error naming the flag.
func (o *Options) Provider(ctx context.Context, t runtime.Transport, cat *catalog.Catalog) (cloud.Provider, error) {
	switch o.Cloud {
	case Fake:
		c := fake.New(fake.Options{Catalog: cat, Cluster: t.Cluster, Logger: t.Logger})
		if t.Mode == runtime.ModeNATS {
			go c.Run(ctx, 100*time.Millisecond)
		}
		return c, nil
	case AWS:
		cfg, err := dvaws.NewConfig(ctx, dvaws.ConfigOptions{Region: o.Region, Endpoint: o.AWSEndpoint})
		if err != nil {
			return nil, fmt.Errorf("aws config: %w", err)
		}
		ec2c, ssmc := dvaws.Clients(cfg)
		return dvaws.New(dvaws.Options{Cluster: t.Cluster, ClusterName: o.EKSName, ClusterEndpoint: o.EKSEndpoint,
			ClusterCA: o.EKSCA, ServiceCIDR: o.ServiceCIDR, KubernetesVersion: o.KubernetesVersion, Catalog: cat, EC2: ec2c, SSM: ssmc})
	default:
		return nil, fmt.Errorf("--cloud (%s) %q: must be %s or %s", runtime.EnvName("cloud"), o.Cloud, Fake, AWS)
	}
}
