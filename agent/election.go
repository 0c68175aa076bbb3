package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Leader election timings: client-go's and Karpenter's defaults (kubernetes-sigs/karpenter
// pkg/operator/options: leader election through a coordination.k8s.io Lease; controller-runtime
// leaseDuration 15 s, renewDeadline 10 s, retryPeriod 2 s). A leader that dies is replaced within
// about LeaseDuration + RetryPeriod.
const (
	DefaultLeaseDuration = 15 * time.Second
	DefaultRenewDeadline = 10 * time.Second
	DefaultRetryPeriod   = 2 * time.Second
)

// DefaultLeaseName is the agent's Lease in its namespace (agent/rbac.yaml grants only it).
const DefaultLeaseName = "dovetail-agent"

// errStandby keeps a pending-pod batch in the batcher while this agent does not lead.
var errStandby = errors.New("standing by: another replica leads")

// LeaderElection configures the Lease the agent's replicas elect a leader with.
type LeaderElection struct {
	// Namespace and Name locate the Lease (defaults: the agent's namespace, DefaultLeaseName).
	Namespace, Name string
	// Identity names this replica in the Lease's holderIdentity (default: the hostname, which
	// is the pod's name).
	Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod as client-go's leaderelection defines them
	// (defaults above); LeaseDuration > RenewDeadline > RetryPeriod > 0.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

func (l *LeaderElection) validate(namespace string) error {
	if l.Namespace == "" {
		l.Namespace = namespace
	}
	if l.Name == "" {
		l.Name = DefaultLeaseName
	}
	if l.Identity == "" {
		h, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("agent config: leaderElection.identity: required (no hostname: %v)", err)
		}
		l.Identity = h
	}
	l.LeaseDuration = orDefault(l.LeaseDuration, DefaultLeaseDuration)
	l.RenewDeadline = orDefault(l.RenewDeadline, DefaultRenewDeadline)
	l.RetryPeriod = orDefault(l.RetryPeriod, DefaultRetryPeriod)
	for _, msg := range validation.IsDNS1123Subdomain(l.Name) {
		return fmt.Errorf("agent config: leaderElection.name %q: %s", l.Name, msg)
	}
	if !(l.LeaseDuration > l.RenewDeadline && l.RenewDeadline > l.RetryPeriod && l.RetryPeriod > 0) {
		return fmt.Errorf("agent config: leaderElection: leaseDuration %s > renewDeadline %s > retryPeriod %s > 0 is required",
			l.LeaseDuration, l.RenewDeadline, l.RetryPeriod)
	}
	return nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// Leading reports whether this agent publishes and applies now (always true after the caches
// synced for an agent without LeaderElection).
func (a *Agent) Leading() bool { return a.leading.Load() }

// elect campaigns for the Lease and leads while it holds it. It returns nil when ctx ends (the
// Lease is released so a standby takes over at once), the leader's error if leading failed, or
// an error when the Lease was lost: the process should exit, and its restart stands by.
func (a *Agent) elect(ctx context.Context) error {
	l := a.cfg.LeaderElection
	ectx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu      sync.Mutex
		over    bool // le.Run returned: a late OnStartedLeading must not lead
		leadErr error
		leaders sync.WaitGroup
	)
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: l.Namespace, Name: l.Name},
			Client:     a.cfg.Kube.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: l.Identity},
		},
		LeaseDuration: l.LeaseDuration, RenewDeadline: l.RenewDeadline, RetryPeriod: l.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            l.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			// Run calls it on a goroutine of its own, with a context that ends when the Lease
			// is lost or released.
			OnStartedLeading: func(lctx context.Context) {
				mu.Lock()
				if over {
					mu.Unlock()
					return
				}
				leaders.Add(1)
				mu.Unlock()
				defer leaders.Done()
				a.log().Info("leading: publishing events and applying commands", "lease", l.Namespace+"/"+l.Name, "identity", l.Identity)
				if err := a.lead(lctx); err != nil {
					mu.Lock()
					leadErr = err
					mu.Unlock()
					cancel() // a leader that failed gives the Lease up
				}
			},
			OnStoppedLeading: func() {},
			OnNewLeader: func(id string) {
				if id != l.Identity {
					a.log().Info("standing by", "leader", id, "lease", l.Namespace+"/"+l.Name)
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	le.Run(ectx)
	mu.Lock()
	over = true
	mu.Unlock()
	// The leader's work (a command being applied) ends with its context before Run returns.
	leaders.Wait()
	mu.Lock()
	defer mu.Unlock()
	switch {
	case leadErr != nil:
		return leadErr
	case ctx.Err() != nil:
		return nil
	}
	return fmt.Errorf("lost the leader election Lease %s/%s; exiting so that a restart stands by", l.Namespace, l.Name)
}
