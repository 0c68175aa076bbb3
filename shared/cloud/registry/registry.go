// Package registry names the clouds Dovetail runs on and what each brings: the kind of NodeClass
// its NodePools reference, its embedded catalog, its NodeClass → node settings rule and the
// constructor of its provider. Every place that used to switch on --cloud or load the AWS
// catalog by hand (the functions' flags, local dev, dovetail plan) looks the cloud up here, so a
// new cloud is one more entry.
package registry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/pricing"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"

	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/catalog/awsrefresh"
	"github.com/dovetail-dev/dovetail/shared/catalog/catalogcache"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	dvaws "github.com/dovetail-dev/dovetail/shared/cloud/aws"
	"github.com/dovetail-dev/dovetail/shared/cloud/aws/ec2class"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake"
	"github.com/dovetail-dev/dovetail/shared/provisioning"
)

// Names of the registered clouds (the --cloud values).
const (
	// Fake is the in-memory cloud over the real AWS catalog (local dev, tests).
	Fake = "fake"
	// AWS is EC2 through aws-sdk-go-v2 (shared/cloud/aws).
	AWS = "aws"
	// Azure is Azure VMs through azure-sdk-for-go (shared/cloud/azure), for AKSNodeClass NodePools.
	Azure = "azure"
)

// Config is what a provider is built from. Fields a cloud does not use are ignored.
type Config struct {
	// Cluster is the cluster the provider's instances are tagged for.
	Cluster string
	// Catalog is the cloud's catalog (Cloud.Catalog's).
	Catalog *catalog.Catalog
	Logger  *slog.Logger
	// DriveClock runs the fake cloud's clock (every 100 ms, until ctx ends) so its instances
	// boot: for long-lived workers; a Lambda invocation is too short-lived to drive it.
	DriveClock bool
	// AWS holds the EC2 provider's settings.
	AWS AWSConfig
	// Azure holds the Azure provider's settings.
	Azure AzureConfig
	// Blobs is the claim-check store, where the aws and azure clouds cache what the region's
	// catalog APIs answered (catalogcache); nil refreshes on every start.
	Blobs catalogcache.Store
	// CatalogTTL is how long a cached catalog is reused (default catalogcache.DefaultTTL).
	CatalogTTL time.Duration
}

// AWSConfig configures the EC2 provider.
type AWSConfig struct {
	// Endpoint is an EC2/SSM endpoint URL (a local one); empty: the real AWS endpoints.
	Endpoint string
	// Region; empty: the SDK's default (AWS_REGION).
	Region string
	// EKSName, EKSEndpoint and EKSCA (base64) are what nodes join; EKSName empty: Config.Cluster.
	EKSName, EKSEndpoint, EKSCA string
	// ServiceCIDR, KubernetesVersion ("1.31", for AMI aliases) and ClusterDNS override the
	// cluster facts the agent discovers (dvaws.Options); empty: the discovered ones.
	ServiceCIDR       string
	KubernetesVersion string
	ClusterDNS        string
	// Governance is what the deployment's IAM lets NodeClasses launch with.
	Governance dvaws.Governance
}

// Cloud is one registered cloud.
type Cloud struct {
	// Name is the --cloud value.
	Name string
	// NodeClassKind is the kind of NodeClass its NodePools reference (EC2NodeClass).
	NodeClassKind string
	// Catalog loads the embedded catalog of a region ("" is the cloud's default region), for
	// offline use: `dovetail plan`, local dev, tests.
	Catalog func(region string) (*catalog.Catalog, error)
	// FunctionCatalog is the catalog the functions decide with: the fake's embedded one of
	// Config.AWS.Region; for aws, the region's catalog refreshed from the EC2 and Price List
	// APIs and cached in Config.Blobs (never the embedded data).
	FunctionCatalog func(ctx context.Context, c Config) (*catalog.Catalog, error)
	// NodeSettings is the cloud's NodeClass → node settings rule, which the solver plans
	// allocatable with (provisioning.Input.NodeSettings).
	NodeSettings provisioning.NodeSettingsFunc
	// NodeClassRules are the cloud's NodeClass drift rules with no deployment configuration, for
	// deciding without a provider (`dovetail plan --disruption`); a function asks its provider
	// (cloud.RulesOf), whose rules also know the deployment's settings (Azure's kubelet identity).
	NodeClassRules cloud.NodeClassRules
	// New builds the provider. Errors name the setting that is wrong.
	New func(ctx context.Context, c Config) (cloud.Provider, error)
}

// clouds are the registered clouds, the default (the fake) first; azure.go appends Azure, except
// in the Lambda build (-tags lambda.norpc), which runs only on AWS.
var clouds = []Cloud{
	{Name: Fake, NodeClassKind: apisv1.KindEC2NodeClass, Catalog: embeddedAWS, FunctionCatalog: fakeCatalog, NodeSettings: cloud.NodeSettingsFor, NodeClassRules: ec2class.Rules{}, New: newFake},
	{Name: AWS, NodeClassKind: apisv1.KindEC2NodeClass, Catalog: embeddedAWS, FunctionCatalog: liveAWSCatalog, NodeSettings: cloud.NodeSettingsFor, NodeClassRules: ec2class.Rules{}, New: newAWS},
}

// Names lists the registered clouds in registration order, the default first.
func Names() []string {
	out := make([]string, 0, len(clouds))
	for _, c := range clouds {
		out = append(out, c.Name)
	}
	return out
}

// Lookup returns the named cloud. Error: a name that is not registered, e.g.
// `"gcp": must be fake or aws or azure`.
func Lookup(name string) (Cloud, error) {
	for _, c := range clouds {
		if c.Name == name {
			return c, nil
		}
	}
	return Cloud{}, fmt.Errorf("%q: must be %s", name, strings.Join(Names(), " or "))
}

// embeddedAWS is the embedded catalog of an AWS region (us-east-1 by default).
func embeddedAWS(region string) (*catalog.Catalog, error) {
	if region == "" {
		region = catalog.AWSRegion
	}
	return catalog.AWSRegionCatalog(region)
}

func fakeCatalog(_ context.Context, c Config) (*catalog.Catalog, error) {
	return embeddedAWS(c.AWS.Region)
}

// liveAWSCatalog refreshes the region's catalog through the SDK (cached in the claim-check store).
// The Price List API answers in us-east-1 for every region (AWS Price List API: its endpoints are
// us-east-1, eu-central-1 and ap-south-1); a local endpoint serves both.
func liveAWSCatalog(ctx context.Context, c Config) (*catalog.Catalog, error) {
	cfg, err := dvaws.NewConfig(ctx, dvaws.ConfigOptions{Region: c.AWS.Region, Endpoint: c.AWS.Endpoint})
	if err != nil {
		return nil, fmt.Errorf("aws config: %w", err)
	}
	if cfg.Region == "" {
		return nil, errors.New("--region (DOVETAIL_REGION or AWS_REGION): required to build the region's catalog")
	}
	ec2c, _ := dvaws.Clients(cfg)
	pc := pricing.NewFromConfig(cfg, func(o *pricing.Options) {
		if c.AWS.Endpoint == "" {
			o.Region = "us-east-1"
		}
	})
	cat, err := awsrefresh.Cached(ctx, c.Blobs, c.CatalogTTL, time.Now(), awsrefresh.Options{Region: cfg.Region, EC2: ec2c, Pricing: pc})
	if cat == nil {
		return nil, fmt.Errorf("catalog of %s: %w", cfg.Region, err)
	}
	if err != nil && c.Logger != nil {
		c.Logger.Warn("catalog cache", "region", cfg.Region, "err", err)
	}
	return cat, nil
}

func newFake(ctx context.Context, c Config) (cloud.Provider, error) {
	// The fake stands for EC2 over the AWS catalog: it repairs by AWS's policies.
	f := fake.New(fake.Options{Catalog: c.Catalog, Cluster: c.Cluster, Logger: c.Logger, RepairPolicies: dvaws.RepairPolicies()})
	if c.DriveClock {
		go f.Run(ctx, 100*time.Millisecond)
	}
	return f, nil
}

func newAWS(ctx context.Context, c Config) (cloud.Provider, error) {
	cfg, err := dvaws.NewConfig(ctx, dvaws.ConfigOptions{Region: c.AWS.Region, Endpoint: c.AWS.Endpoint})
	if err != nil {
		return nil, fmt.Errorf("aws config: %w", err)
	}
	ec2c, ssmc := dvaws.Clients(cfg)
	return dvaws.New(dvaws.Options{Cluster: c.Cluster, ClusterName: c.AWS.EKSName, ClusterEndpoint: c.AWS.EKSEndpoint,
		ClusterCA: c.AWS.EKSCA, ServiceCIDR: c.AWS.ServiceCIDR, KubernetesVersion: c.AWS.KubernetesVersion, ClusterDNS: c.AWS.ClusterDNS, Catalog: c.Catalog, EC2: ec2c, SSM: ssmc,
		IAM: dvaws.IAMClient(cfg), Region: cfg.Region, Governance: c.AWS.Governance})
}

// ForNodeClasses picks the cloud a set of NodeClasses is for: the registered real cloud (not the
// fake) whose NodeClass kind they all have; AWS when there are none. Error: kinds of two clouds,
// or a kind no cloud serves.
func ForNodeClasses(classes []apisv1.NodeClass) (Cloud, error) {
	kinds := map[string]bool{}
	for _, c := range classes {
		if !c.IsZero() {
			kinds[c.Kind()] = true
		}
	}
	if len(kinds) == 0 {
		return Lookup(AWS)
	}
	if len(kinds) > 1 {
		ks := make([]string, 0, len(kinds))
		for k := range kinds {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		return Cloud{}, fmt.Errorf("nodeClasses: kinds %s belong to different clouds; plan one cloud at a time", strings.Join(ks, " and "))
	}
	for _, c := range clouds {
		if c.Name != Fake && kinds[c.NodeClassKind] {
			return c, nil
		}
	}
	for k := range kinds {
		return Cloud{}, fmt.Errorf("nodeClasses: kind %s is served by no registered cloud (%s)", k, strings.Join(Names(), ", "))
	}
	return Cloud{}, nil
}
