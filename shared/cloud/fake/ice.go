package fake

import (
	"fmt"
	"path"

	"github.com/dovetail-dev/dovetail/shared/cloud"
)

// EC2 fleet error codes the fake reports for refused offerings (EC2 API reference, "Error codes").
const (
	// CodeInsufficientInstanceCapacity: AWS has no capacity for the offering right now.
	CodeInsufficientInstanceCapacity = "InsufficientInstanceCapacity"
	// CodeUnsupported: the instance type is not offered in that zone (or with that capacity type).
	CodeUnsupported = "Unsupported"
	// CodeInsufficientFreeAddresses: the zone's subnet has no free private address left.
	CodeInsufficientFreeAddresses = "InsufficientFreeAddressesInSubnet"
	// CodeMaxSpotInstanceCountExceeded: the account's spot instance limit is reached.
	CodeMaxSpotInstanceCountExceeded = "MaxSpotInstanceCountExceeded"
)

// Pattern selects offerings. Each field is a path.Match pattern ("m5.*", "us-east-1[ab]"); an
// empty field matches anything.
type Pattern struct {
	InstanceType string
	Zone         string
	CapacityType string
}

// iceRule is an injected capacity error.
type iceRule struct {
	pattern Pattern
	code    string
}

// InjectICE makes every offering matching p refuse launches with code (default
// CodeInsufficientInstanceCapacity) until ClearICE. Rules apply in the order given; the first
// match's code is reported. A malformed pattern returns an error naming the field.
func (c *Cloud) InjectICE(p Pattern, code string) error {
	for _, f := range [...]struct{ field, pattern string }{{"instanceType", p.InstanceType}, {"zone", p.Zone}, {"capacityType", p.CapacityType}} {
		if _, err := path.Match(f.pattern, ""); err != nil {
			return fmt.Errorf("pattern.%s: %q: %w", f.field, f.pattern, err)
		}
	}
	if code == "" {
		code = CodeInsufficientInstanceCapacity
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ice = append(c.ice, iceRule{pattern: p, code: code})
	return nil
}

// InjectOfferingICE refuses exactly the offering o (its price is ignored); an empty field of o
// matches any value, as in Pattern.
func (c *Cloud) InjectOfferingICE(o cloud.OfferingRef, code string) error {
	return c.InjectICE(Pattern{InstanceType: quoteMeta(o.InstanceType), Zone: quoteMeta(o.Zone), CapacityType: quoteMeta(o.CapacityType)}, code)
}

// ClearICE removes every injected capacity error and capacity limit.
func (c *Cloud) ClearICE() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ice = nil
	c.pools = nil
}

// capacityPool is an injected finite capacity pool: left more launches into offerings matching
// pattern, then InsufficientInstanceCapacity.
type capacityPool struct {
	pattern Pattern
	left    int
}

// LimitCapacity gives the offerings matching p a finite pool of n more instances (all of them
// together), after which launches into them are refused with CodeInsufficientInstanceCapacity
// until ClearICE: EC2's capacity of an instance type in a zone is finite, and CreateFleet
// reports the exhausted pool as InsufficientInstanceCapacity (EC2 API reference, "Error codes";
// "Insufficient instance capacity" in the EC2 user guide's troubleshooting). A fleet can then
// launch part of what a decision plans: the partial result an atomic launch rolls back.
// Terminating an instance does not return it to the pool (another account may take it). Error:
// a malformed pattern (naming the field) or n < 0.
func (c *Cloud) LimitCapacity(p Pattern, n int) error {
	if n < 0 {
		return fmt.Errorf("n: %d: must not be negative", n)
	}
	for _, f := range [...]struct{ field, pattern string }{{"instanceType", p.InstanceType}, {"zone", p.Zone}, {"capacityType", p.CapacityType}} {
		if _, err := path.Match(f.pattern, ""); err != nil {
			return fmt.Errorf("pattern.%s: %q: %w", f.field, f.pattern, err)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pools = append(c.pools, &capacityPool{pattern: p, left: n})
	return nil
}

func (p *capacityPool) matches(o cloud.OfferingRef) bool {
	return match(p.pattern.InstanceType, o.InstanceType) && match(p.pattern.Zone, o.Zone) && match(p.pattern.CapacityType, o.CapacityType)
}

// poolExhausted reports whether a pool matching o has nothing left. Called with c.mu held.
func (c *Cloud) poolExhausted(o cloud.OfferingRef) bool {
	for _, p := range c.pools {
		if p.left <= 0 && p.matches(o) {
			return true
		}
	}
	return false
}

// takeFromPools counts one launch into o against every pool matching it. Called with c.mu held.
func (c *Cloud) takeFromPools(o cloud.OfferingRef) {
	for _, p := range c.pools {
		if p.matches(o) {
			p.left--
		}
	}
}

// iceCode returns the code of the first rule matching o. Called with c.mu held.
func (c *Cloud) iceCode(o cloud.OfferingRef) (string, bool) {
	for _, r := range c.ice {
		if match(r.pattern.InstanceType, o.InstanceType) && match(r.pattern.Zone, o.Zone) && match(r.pattern.CapacityType, o.CapacityType) {
			return r.code, true
		}
	}
	return "", false
}

func match(pattern, s string) bool {
	if pattern == "" {
		return true
	}
	ok, _ := path.Match(pattern, s) // validated in InjectICE
	return ok
}

// quoteMeta escapes path.Match's special characters so s matches only itself.
func quoteMeta(s string) string {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '*', '?', '[', ']', '\\':
			out = append(out, '\\')
		}
		out = append(out, s[i])
	}
	return string(out)
}

// InjectBootFailure makes instances launched from now on into an offering matching p run (and
// bill) without their kubelet ever registering a Node — a bad AMI, user data that fails, a node
// that cannot reach the API server — until ClearBootFailures. The lifecycle's registration
// timeout is what must reap them. A malformed pattern returns an error naming the field.
func (c *Cloud) InjectBootFailure(p Pattern) error {
	for _, f := range [...]struct{ field, pattern string }{{"instanceType", p.InstanceType}, {"zone", p.Zone}, {"capacityType", p.CapacityType}} {
		if _, err := path.Match(f.pattern, ""); err != nil {
			return fmt.Errorf("pattern.%s: %q: %w", f.field, f.pattern, err)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.bootFailures = append(c.bootFailures, p)
	return nil
}

// ClearBootFailures removes every injected boot failure (instances already launched keep theirs).
func (c *Cloud) ClearBootFailures() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.bootFailures = nil
}

// bootFails reports whether an instance launched into o never registers. Called with c.mu held.
func (c *Cloud) bootFails(o cloud.OfferingRef) bool {
	for _, p := range c.bootFailures {
		if match(p.InstanceType, o.InstanceType) && match(p.Zone, o.Zone) && match(p.CapacityType, o.CapacityType) {
			return true
		}
	}
	return false
}
