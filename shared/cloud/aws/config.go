package aws

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/dovetail-dev/dovetail/shared/awsconfig"
)

// ConfigOptions select where the SDK clients go.
type ConfigOptions struct {
	// Region defaults to the SDK's default chain (AWS_REGION, shared config; the environment
	// only in the Lambda build: awsconfig.Load).
	Region string
	// Endpoint, when set, sends every client to that base URL (a local EC2/SSM endpoint such as
	// shared/cloud/fake/ec2api). The config is then built from these options alone, so no
	// environment variable or shared config file can send the clients elsewhere.
	Endpoint string
	// Credentials default to the SDK's chain; with an Endpoint and no Credentials, static test
	// credentials (key "AKIDLOCALENDPOINT") are used, which only a local endpoint accepts.
	Credentials aws.CredentialsProvider
	// MaxAttempts (default 3, the SDK's) and MaxBackoff (default 20 s, the SDK's) bound the
	// adaptive retryer.
	MaxAttempts int
	MaxBackoff  time.Duration
}

// NewConfig returns an SDK config whose clients retry throttling and transient errors with the
// SDK's adaptive retry mode (retry.NewAdaptiveMode: the standard retryer plus client-side rate
// limiting that backs off when the service throttles).
func NewConfig(ctx context.Context, o ConfigOptions) (aws.Config, error) {
	retryer := func() aws.Retryer {
		return retry.NewAdaptiveMode(func(a *retry.AdaptiveModeOptions) {
			a.StandardOptions = append(a.StandardOptions, func(s *retry.StandardOptions) {
				if o.MaxAttempts > 0 {
					s.MaxAttempts = o.MaxAttempts
				}
				if o.MaxBackoff > 0 {
					s.MaxBackoff = o.MaxBackoff
					s.Backoff = retry.NewExponentialJitterBackoff(o.MaxBackoff)
				}
			})
		})
	}
	if o.Endpoint != "" {
		creds := o.Credentials
		if creds == nil {
			creds = credentials.NewStaticCredentialsProvider("AKIDLOCALENDPOINT", "local-endpoint-secret", "")
		}
		region := o.Region
		if region == "" {
			region = "us-east-1"
		}
		return aws.Config{Region: region, Credentials: aws.NewCredentialsCache(creds), BaseEndpoint: aws.String(o.Endpoint),
			Retryer: retryer}, nil
	}
	return awsconfig.Load(ctx, awsconfig.Options{Region: o.Region, Credentials: o.Credentials, Retryer: retryer})
}

// Clients builds the EC2 and SSM clients of a config.
func Clients(cfg aws.Config) (*ec2.Client, *ssm.Client) {
	return ec2.NewFromConfig(cfg), ssm.NewFromConfig(cfg)
}

// IAMClient builds the IAM client of a config (instance profiles for spec.role). IAM is a
// global service: its endpoint is the same for every region; cfg.BaseEndpoint, when set, is
// used as for EC2.
func IAMClient(cfg aws.Config) *iam.Client { return iam.NewFromConfig(cfg) }
