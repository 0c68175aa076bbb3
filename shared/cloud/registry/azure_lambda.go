//go:build lambda.norpc

package registry

// AzureConfig is empty in the Lambda build (-tags lambda.norpc), which registers no Azure cloud
// (azure.go): Lookup("azure") is an error there.
type AzureConfig struct{}
