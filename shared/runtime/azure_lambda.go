//go:build lambda.norpc

package runtime

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/spf13/pflag"
)

// The Lambda build (-tags lambda.norpc, hack/package.sh) runs only on AWS: it leaves out the
// Azure Functions mode and the Azure SDK it links (azure.go), a tenth of a bootstrap.

// AzureClientOptions is empty in the Lambda build (Options.AzureClientOptions).
type AzureClientOptions = struct{}

// registerAzureFlags adds nothing: the Lambda build has no Azure Functions mode.
func registerAzureFlags(*pflag.FlagSet, *Options) {}

func runAzure(context.Context, Function, Options, *slog.Logger) error {
	return fmt.Errorf("%s is set, but this binary is the Lambda build (-tags lambda.norpc), which has no Azure Functions mode: deploy the build without that tag", EnvCustomHandlerPort)
}
