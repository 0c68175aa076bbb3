package registry

import (
	"context"
	"errors"

	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/cloud"
)

// azureFunctionCatalog is the catalog the functions decide with on Azure: the embedded catalog of
// Config.AWS.Region's Azure counterpart (Config.Azure.Region).
func azureFunctionCatalog(_ context.Context, c Config) (*catalog.Catalog, error) {
	return catalog.AzureRegionCatalog(c.Azure.Region)
}

func newAzure(_ context.Context, _ Config) (cloud.Provider, error) {
	return nil, errors.New("azure provider: not in this build yet")
}

// AzureConfig configures the Azure provider.
type AzureConfig struct {
	// Region is the Azure region (eastus); empty: catalog.AzureRegion.
	Region string
}
