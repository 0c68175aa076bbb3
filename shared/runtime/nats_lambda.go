//go:build lambda.norpc

package runtime

import (
	"context"
	"fmt"
	"log/slog"
)

// The Lambda build (-tags lambda.norpc, hack/package.sh) has no NATS worker mode: it leaves out
// the NATS client and the Prometheus client with protobuf it links (nats.go), so a bootstrap
// that Lambda did not start says so instead of connecting to NATS.

func runNATS(context.Context, Function, Options, *slog.Logger) error {
	return fmt.Errorf("%s is not set, so this runs as a NATS worker, but this binary is the Lambda build (-tags lambda.norpc), which has no NATS worker mode: run the build without that tag (make package: dist/<function>-linux-<arch>)", EnvLambdaRuntimeAPI)
}
