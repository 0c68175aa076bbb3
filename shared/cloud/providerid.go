package cloud

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// awsProviderIDPrefix is how the AWS cloud provider writes node.spec.providerID:
// "aws:///<availability zone>/<instance id>" (kubernetes/cloud-provider-aws).
const awsProviderIDPrefix = "aws:///"

// instanceIDPattern accepts EC2 instance IDs: "i-" then 17 lowercase hex digits (8 for instances
// created before 2016, per the EC2 resource ID documentation).
var instanceIDPattern = regexp.MustCompile(`^i-([0-9a-f]{8}|[0-9a-f]{17})$`)

// ErrIdempotentParameterMismatch is returned when a ClientToken is reused with different launch
// parameters; EC2 answers such a request with the error code IdempotentParameterMismatch.
var ErrIdempotentParameterMismatch = errors.New("IdempotentParameterMismatch")

// AWSProviderID renders the providerID of an EC2 instance: "aws:///us-east-1a/i-0123456789abcdef0".
func AWSProviderID(zone, instanceID string) string {
	return awsProviderIDPrefix + zone + "/" + instanceID
}

// ParseAWSProviderID splits "aws:///<zone>/<instance id>" into zone and instance ID. It returns an
// error naming what is wrong when the string is not of that shape.
func ParseAWSProviderID(providerID string) (zone, instanceID string, err error) {
	rest, ok := strings.CutPrefix(providerID, awsProviderIDPrefix)
	if !ok {
		return "", "", fmt.Errorf("providerID %q: want prefix %q", providerID, awsProviderIDPrefix)
	}
	zone, instanceID, ok = strings.Cut(rest, "/")
	if !ok || zone == "" {
		return "", "", fmt.Errorf("providerID %q: want aws:///<zone>/<instance id>", providerID)
	}
	if !instanceIDPattern.MatchString(instanceID) {
		return "", "", fmt.Errorf("providerID %q: instance id %q is not i- followed by 17 hex digits", providerID, instanceID)
	}
	return zone, instanceID, nil
}

// ValidInstanceID reports whether id looks like an EC2 instance ID ("i-" and 8 or 17 hex digits).
func ValidInstanceID(id string) bool { return instanceIDPattern.MatchString(id) }
