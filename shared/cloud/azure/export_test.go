package azure

import (
	"fmt"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/dovetail-dev/dovetail/shared/cloud"
)

// RuledOutForTest is what an ARM error with code and message, raised by a create of tried, rules
// out (classify, then ruledOut), for errors the fake ARM cannot be made to raise at create time.
func RuledOutForTest(p *Provider, code, message string, tried cloud.OfferingRef, req []cloud.OfferingRef) []cloud.UnavailableOffering {
	err := fmt.Errorf("%w: %s", &azcore.ResponseError{ErrorCode: code, StatusCode: 409}, message)
	return p.ruledOut(classify(err, tried.CapacityType), tried, req)
}
