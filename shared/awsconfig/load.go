//go:build !lambda.norpc

package awsconfig

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
)

// Load is the SDK's default chain (config.LoadDefaultConfig) with o's overrides: the environment,
// the shared config and credentials files, and every credential provider (SSO, web identity,
// container, instance metadata). The Lambda build's Load is FromEnvironment (load_lambda.go).
func Load(ctx context.Context, o Options) (aws.Config, error) {
	var opts []func(*config.LoadOptions) error
	if o.Retryer != nil {
		opts = append(opts, config.WithRetryer(o.Retryer))
	}
	if o.Region != "" {
		opts = append(opts, config.WithRegion(o.Region))
	}
	if o.Credentials != nil {
		opts = append(opts, config.WithCredentialsProvider(o.Credentials))
	}
	return config.LoadDefaultConfig(ctx, opts...)
}
