package v1

import (
	"encoding/json"
	"fmt"
	"time"
)

// Never is the literal Karpenter uses for "no duration" in expireAfter and consolidateAfter.
const Never = "Never"

// NillableDuration is a duration that may be "Never" (Duration == nil). It marshals as a Go
// duration string ("720h0m0s") or "Never", as Karpenter's does.
type NillableDuration struct {
	Duration *time.Duration
	// Raw keeps the original text so defaults can tell "unset" from "Never".
	Raw string
}

// MustParseNillableDuration parses "Never" or a Go duration and panics on error (tests, defaults).
func MustParseNillableDuration(s string) NillableDuration {
	d, err := ParseNillableDuration(s)
	if err != nil {
		panic(err)
	}
	return d
}

// ParseNillableDuration parses "Never" or a Go duration string ("30s", "720h").
func ParseNillableDuration(s string) (NillableDuration, error) {
	if s == Never {
		return NillableDuration{Raw: Never}, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return NillableDuration{}, fmt.Errorf("%q is neither a duration nor %q", s, Never)
	}
	if d < 0 {
		return NillableDuration{}, fmt.Errorf("%q is negative", s)
	}
	return NillableDuration{Duration: &d, Raw: s}, nil
}

// IsSet reports whether the field was given at all.
func (n NillableDuration) IsSet() bool { return n.Raw != "" || n.Duration != nil }

// IsNever reports whether the field is "Never".
func (n NillableDuration) IsNever() bool { return n.IsSet() && n.Duration == nil }

// UnmarshalJSON accepts a string: "Never" or a Go duration.
func (n *NillableDuration) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*n = NillableDuration{}
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("want a duration string or %q, got %s", Never, string(b))
	}
	d, err := ParseNillableDuration(s)
	if err != nil {
		return err
	}
	*n = d
	return nil
}

// MarshalJSON writes "Never", the duration, or null when unset.
func (n NillableDuration) MarshalJSON() ([]byte, error) {
	switch {
	case n.Duration != nil:
		return json.Marshal(n.Duration.String())
	case n.Raw == Never:
		return json.Marshal(Never)
	default:
		return []byte("null"), nil
	}
}
