// Package cloud defines the Provider interface every cloud (AWS, Azure, the fake) implements.
// The core decides which offerings a NodeClaim may use; the provider turns that ranked list into
// one running instance, idempotently, and reports which offerings turned out unavailable.
package cloud

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/repair"
)

// OfferingRef names one offering to try.
type OfferingRef struct {
	InstanceType string  `json:"instanceType"`
	Zone         string  `json:"zone"`
	CapacityType string  `json:"capacityType"`
	PricePerHour float64 `json:"pricePerHour"` // USD per hour, as the decision saw it
	// ReservationID and ReservationType name the capacity reservation a reserved offering
	// launches into (capacity type reserved; type default or capacity-block).
	ReservationID   string `json:"reservationID,omitempty"`
	ReservationType string `json:"reservationType,omitempty"`
}

// Key is the offering's identity, as marks and maps spell it.
func (o OfferingRef) Key() events.OfferingKey {
	return events.OfferingKey{InstanceType: o.InstanceType, Zone: o.Zone, CapacityType: o.CapacityType}
}

// String renders "type/zone/capacity-type".
func (o OfferingRef) String() string { return o.Key().String() }

// LaunchRequest asks for one instance for one NodeClaim.
type LaunchRequest struct {
	// ClientToken makes the launch idempotent: the same token returns the same instance
	// (EC2 CreateFleet ClientToken semantics). Derived from the decision, at most 64 ASCII chars.
	ClientToken string
	Cluster     string
	NodeClaim   *apisv1.NodeClaim
	// NodeClass is the NodeClass the NodePool references (EC2NodeClass for AWS); a provider
	// refuses a kind it does not serve.
	NodeClass apisv1.NodeClass
	// Offerings is the ranked list the fleet may choose from, cheapest first.
	Offerings []OfferingRef
	// Labels and Taints are what the node registers with (the NodePool template's plus the
	// offering's well-known labels, which the provider adds).
	Labels map[string]string
	Taints []corev1.Taint
	// Tags go on the instance (and volumes): cluster, NodePool, NodeClaim, Name, NodeClass tags.
	Tags map[string]string
	// ClusterFacts are the facts of the snapshot the launch was decided on (the Kubernetes
	// version, cluster DNS address, service range and IP family the agent discovered); nil when
	// the snapshot has none. A provider's own configuration, when set, overrides each.
	ClusterFacts *events.ClusterFacts
}

// Instance is a launched instance as the cloud reports it.
type Instance struct {
	ID           string            `json:"id"`
	ProviderID   string            `json:"providerID"` // aws:///us-east-1a/i-0123...
	InstanceType string            `json:"instanceType"`
	Zone         string            `json:"zone"`
	CapacityType string            `json:"capacityType"`
	PricePerHour float64           `json:"pricePerHour"`
	State        string            `json:"state"` // pending, running, shutting-down, terminated
	LaunchTime   time.Time         `json:"launchTime"`
	Tags         map[string]string `json:"tags,omitempty"`
	// ImageID is the image the instance boots, when the cloud reports it (an Azure VM's gallery
	// image version id); "" otherwise.
	ImageID string `json:"imageID,omitempty"`
	// CapacityReservationID and CapacityReservationType are set for an instance launched into a
	// capacity reservation (CapacityType reserved).
	CapacityReservationID   string `json:"capacityReservationID,omitempty"`
	CapacityReservationType string `json:"capacityReservationType,omitempty"`
	// PlacementGroupID and PlacementPartition are the EC2 placement group the instance runs in
	// and its partition (DescribeInstances Placement.GroupId, PartitionNumber; the partition is
	// 0 until EC2 reports it, and outside partition groups).
	PlacementGroupID   string `json:"placementGroupID,omitempty"`
	PlacementPartition int32  `json:"placementPartition,omitempty"`
	// Refused are the offerings the launch found unavailable before this one succeeded (a
	// provider that tries offerings one by one, as Azure's does): the launch step marks them as
	// it marks an InsufficientCapacityError's.
	Refused []UnavailableOffering `json:"refused,omitempty"`
}

// Instance states, as EC2 names them.
const (
	StatePending      = "pending"
	StateRunning      = "running"
	StateShuttingDown = "shutting-down"
	StateTerminated   = "terminated"
)

// Provider launches and terminates instances. Implementations must be safe for concurrent use.
type Provider interface {
	// Name is "aws", "azure" or "fake".
	Name() string
	// Create launches one instance from req.Offerings (in order of preference). It returns the
	// same instance for a repeated ClientToken. When no offering can be had it returns an
	// *InsufficientCapacityError listing the offerings found unavailable.
	Create(ctx context.Context, req LaunchRequest) (*Instance, error)
	// Delete terminates the instance. Only instances tagged for this provider's cluster may be
	// terminated; others return an error. Deleting a terminated instance is not an error.
	Delete(ctx context.Context, providerID string) error
	// Get returns one instance, or ErrNotFound.
	Get(ctx context.Context, providerID string) (*Instance, error)
	// List returns the instances tagged for the cluster that are not terminated.
	List(ctx context.Context, cluster string) ([]Instance, error)
}

// NodeClassResolver is a Provider that resolves NodeClasses, as Karpenter's NodeClass status
// controllers do: the lifecycle function writes what it returns as the NodeClass's status, and
// releases what it created when the NodeClass is deleted.
type NodeClassResolver interface {
	// ResolveNodeClass returns the NodeClass with its status resolved from the cloud (for an
	// EC2NodeClass: subnets, security groups, AMIs, instance profile, and the conditions
	// SubnetsReady, SecurityGroupsReady, AMIsReady, InstanceProfileReady, ValidationSucceeded,
	// Ready). A selector that matches nothing is a False condition; the error is a failed call,
	// to be retried.
	ResolveNodeClass(ctx context.Context, nc apisv1.NodeClass) (apisv1.NodeClass, error)
	// ReleaseNodeClass deletes what ResolveNodeClass created for the NodeClass (an instance
	// profile for spec.role). What is already gone is success.
	ReleaseNodeClass(ctx context.Context, nc apisv1.NodeClass) error
}

// Repairer is a Provider with node repair policies (Karpenter's CloudProvider.RepairPolicies):
// the Node conditions that, held for their toleration duration, make the lifecycle function
// replace the node (shared/repair decides). A Provider that is not a Repairer, or returns none,
// repairs nothing.
type Repairer interface {
	// RepairPolicies returns the cloud's policies; a fixed list, no call to the cloud.
	RepairPolicies() []repair.Policy
}

// ReservationCounter is a Provider that reports the free instances of capacity reservations,
// as EC2's DescribeCapacityReservations does (AvailableInstanceCount, TotalInstanceCount). The
// deciding functions ask it once per plan for the reservations their NodeClasses' status lists.
type ReservationCounter interface {
	// ReservationCounts returns the counts of the active reservations among ids; an id that does
	// not exist or is not active is left out. The error is a failed call, to be retried.
	ReservationCounts(ctx context.Context, ids []string) (map[string]apisv1.ReservationCount, error)
}

// LeftoverCollector is a Provider whose launches create resources besides the instance (an Azure
// network interface per VM) that a failed or interrupted launch can leave behind. The provision
// function deletes the leftovers tagged for its cluster that no instance uses and no NodeClaim
// names, once older than its orphan grace period and seen on two complete snapshots, as it does
// orphan instances (Karpenter Azure's NIC garbage collection).
type LeftoverCollector interface {
	// Leftovers lists the resources tagged for cluster that no instance uses, sorted by ID.
	Leftovers(ctx context.Context, cluster string) ([]Leftover, error)
	// DeleteLeftover deletes one by its ID. It reads it first and refuses, wrapping ErrNotOwned,
	// one not tagged for the provider's cluster or in use by an instance again; one already
	// gone is success.
	DeleteLeftover(ctx context.Context, id string) error
}

// Leftover is a resource a launch created besides its instance.
type Leftover struct {
	// ID is the cloud's id (an ARM resource id).
	ID string `json:"id"`
	// Kind names the resource ("networkInterface").
	Kind string `json:"kind"`
	// Created is when the launch created it (zero when unknown: then it counts as old).
	Created time.Time         `json:"created"`
	Tags    map[string]string `json:"tags,omitempty"`
}

// ErrNotOwned is wrapped by Delete for an instance not tagged for the provider's cluster: a
// refusal that no retry changes (a person must look), not a transient failure.
var ErrNotOwned = errors.New("instance not tagged for this cluster")

// ErrNotFound is returned when an instance does not exist.
var ErrNotFound = errors.New("instance not found")

// UnavailableOffering is an offering the cloud refused, with the cloud's error code.
type UnavailableOffering struct {
	Offering OfferingRef `json:"offering"`
	Code     string      `json:"code"` // e.g. InsufficientInstanceCapacity
	// Scope limits the mark to launches of one capacity scope (events.OfferingKey.Scope): set
	// for a refusal from inside an EC2 placement group, "" for one that holds for every launch.
	Scope string `json:"scope,omitempty"`
	// TTL is how long the offering stays marked; zero is events.UnavailableOfferingTTL (3
	// minutes, Karpenter's). Azure's error classes set theirs (shared/cloud/azure).
	TTL time.Duration `json:"ttl,omitempty"`
}

// InsufficientCapacityError says no offering of a launch could be fulfilled.
type InsufficientCapacityError struct {
	Unavailable []UnavailableOffering
}

func (e *InsufficientCapacityError) Error() string {
	parts := make([]string, 0, len(e.Unavailable))
	for _, u := range e.Unavailable {
		parts = append(parts, fmt.Sprintf("%s (%s)", u.Offering, u.Code))
	}
	return "insufficient capacity for all offerings: " + strings.Join(parts, ", ")
}

// IsInsufficientCapacity reports whether err is (or wraps) an InsufficientCapacityError.
func IsInsufficientCapacity(err error) bool {
	var ice *InsufficientCapacityError
	return errors.As(err, &ice)
}
