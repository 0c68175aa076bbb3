// Command provision runs the provision function: under AWS Lambda (SQS event source, partial
// batch responses) when Lambda starts it, otherwise as a NATS JetStream worker (see
// shared/runtime). The cloud is the in-memory fake (local dev) unless --cloud aws
// (DOVETAIL_CLOUD=aws) selects EC2.
//
// Build for Lambda (provided.al2023) with: CGO_ENABLED=0 GOOS=linux GOARCH=arm64 go build
// -tags lambda.norpc -o bootstrap ./functions/provision/cmd/provision (or `make package`).
package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/functions/provision"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	dvaws "github.com/dovetail-dev/dovetail/shared/cloud/aws"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake"
	"github.com/dovetail-dev/dovetail/shared/queue"
	"github.com/dovetail-dev/dovetail/shared/runtime"
)

type cloudOptions struct {
	cloud, awsEndpoint, region                           string
	eksName, eksEndpoint, eksCA, serviceCIDR, k8sVersion string
}

func main() {
	o := &cloudOptions{}
	runtime.Main(runtime.Function{
		Name:  provision.Component,
		Short: "Dovetail's provision function: pending pods in, NodeClaims launched, commands out",
		Flags: func(fs *pflag.FlagSet) {
			fs.StringVar(&o.cloud, "cloud", runtime.EnvDefault("cloud", "fake"), "cloud provider: fake (in-memory, local dev) or aws (EC2); env "+runtime.EnvName("cloud"))
			fs.StringVar(&o.awsEndpoint, "aws-endpoint", runtime.EnvDefault("aws-endpoint", ""), "aws: EC2/SSM endpoint URL (a local endpoint); empty: the real AWS endpoints")
			fs.StringVar(&o.region, "region", runtime.EnvDefault("region", ""), "aws: region; empty: the SDK's default (AWS_REGION)")
			fs.StringVar(&o.eksName, "eks-cluster-name", runtime.EnvDefault("eks-cluster-name", ""), "aws: EKS cluster name nodes join; empty: --cluster")
			fs.StringVar(&o.eksEndpoint, "eks-endpoint", runtime.EnvDefault("eks-endpoint", ""), "aws: EKS API server URL nodes join")
			fs.StringVar(&o.eksCA, "eks-ca", runtime.EnvDefault("eks-ca", ""), "aws: EKS cluster CA bundle (base64)")
			fs.StringVar(&o.serviceCIDR, "service-cidr", runtime.EnvDefault("service-cidr", ""), "aws: cluster service CIDR; empty: the provider's default")
			fs.StringVar(&o.k8sVersion, "kubernetes-version", runtime.EnvDefault("kubernetes-version", ""), "aws: Kubernetes minor version (1.31) for AMI aliases")
		},
		Build: func(ctx context.Context, t runtime.Transport) (queue.Handler, error) {
			cat, err := catalog.AWS()
			if err != nil {
				return nil, fmt.Errorf("catalog: %w", err)
			}
			provider, err := o.provider(ctx, t, cat)
			if err != nil {
				return nil, err
			}
			h := &provision.Handler{Cluster: t.Cluster, Catalog: cat, Provider: provider, Publisher: t.Publisher,
				Codec: events.Codec{Blobs: t.Blobs}, Log: t.Logger}
			return h.Handle, nil
		},
	})
}

func (o *cloudOptions) provider(ctx context.Context, t runtime.Transport, cat *catalog.Catalog) (cloud.Provider, error) {
	switch o.cloud {
	case "fake":
		c := fake.New(fake.Options{Catalog: cat, Cluster: t.Cluster, Logger: t.Logger})
		if t.Mode == runtime.ModeNATS {
			// The fake's instances boot on its own clock; a Lambda invocation is too short-lived to drive it.
			go c.Run(ctx, 100*time.Millisecond)
		}
		return c, nil
	case "aws":
		cfg, err := dvaws.NewConfig(ctx, dvaws.ConfigOptions{Region: o.region, Endpoint: o.awsEndpoint})
		if err != nil {
			return nil, fmt.Errorf("aws config: %w", err)
		}
		ec2c, ssmc := dvaws.Clients(cfg)
		return dvaws.New(dvaws.Options{Cluster: t.Cluster, ClusterName: o.eksName, ClusterEndpoint: o.eksEndpoint,
			ClusterCA: o.eksCA, ServiceCIDR: o.serviceCIDR, KubernetesVersion: o.k8sVersion, Catalog: cat, EC2: ec2c, SSM: ssmc})
	default:
		return nil, fmt.Errorf("--cloud (%s) %q: must be fake or aws", runtime.EnvName("cloud"), o.cloud)
	}
}
