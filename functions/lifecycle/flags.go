package lifecycle

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/spf13/pflag"

	core "github.com/dovetail-dev/dovetail/shared/lifecycle"
	"github.com/dovetail-dev/dovetail/shared/runtime"
)

// Flags are the lifecycle function's own flags (beside shared/runtime's and cloudflags'): the
// binary registers them, and the chart's test parses its rendered worker args with them.
type Flags struct {
	// RegistrationTTL is --registration-ttl (DOVETAIL_REGISTRATION_TTL): a Go duration.
	RegistrationTTL string
	// NodeRepair is --node-repair (DOVETAIL_NODE_REPAIR), default true.
	NodeRepair bool
}

// Register adds the flags to fs, their defaults read from the environment.
func (f *Flags) Register(fs *pflag.FlagSet) {
	fs.StringVar(&f.RegistrationTTL, "registration-ttl", runtime.EnvDefault("registration-ttl", core.DefaultRegistrationTTL.String()),
		"how long a launched NodeClaim may wait for its Node before it is deleted and its offering marked unavailable; env "+runtime.EnvName("registration-ttl"))
	fs.BoolVar(&f.NodeRepair, "node-repair", runtime.EnvBool("node-repair", true),
		"replace Nodes unhealthy past the cloud's repair policies (Karpenter's node repair, with its 20% breaker); env "+runtime.EnvName("node-repair"))
}

// Parse checks the values: the registration TTL (a positive duration) and DOVETAIL_NODE_REPAIR
// when set (a strconv.ParseBool value; runtime.EnvBool would keep the default on a typo, and a
// typo must not leave repair on that the operator meant off).
func (f *Flags) Parse() (time.Duration, error) {
	d, err := time.ParseDuration(f.RegistrationTTL)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("--registration-ttl (%s) %q: must be a positive duration such as 15m", runtime.EnvName("registration-ttl"), f.RegistrationTTL)
	}
	if v, ok := os.LookupEnv(runtime.EnvName("node-repair")); ok {
		if _, err := strconv.ParseBool(v); err != nil {
			return 0, fmt.Errorf("%s %q: must be true or false", runtime.EnvName("node-repair"), v)
		}
	}
	return d, nil
}
