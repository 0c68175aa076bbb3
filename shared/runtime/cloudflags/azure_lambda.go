//go:build lambda.norpc

package cloudflags

import "github.com/dovetail-dev/dovetail/shared/cloud/registry"

// azureConfig is empty: the Lambda build registers no Azure cloud (--cloud azure is refused).
func (o *Options) azureConfig() registry.AzureConfig { return registry.AzureConfig{} }
