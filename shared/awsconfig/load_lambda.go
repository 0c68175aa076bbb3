//go:build lambda.norpc

package awsconfig

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// Load is FromEnvironment in the Lambda build (-tags lambda.norpc): a Lambda execution
// environment configures the SDK through environment variables only, and the default chain
// (load.go) would link credential providers it never uses.
func Load(_ context.Context, o Options) (aws.Config, error) { return FromEnvironment(o) }
