// Package fake is an in-memory cloud over the real catalog that implements cloud.Provider the way
// the AWS provider does with an EC2 CreateFleet request of type "instant": one call picks one
// offering from a ranked list by capacity type and price, skips offerings out of capacity, and is
// idempotent by ClientToken. Instances boot after a delay measured on an injected clock and then
// register a Node as a kubelet on EKS would. Capacity errors and spot interruptions can be
// injected. It is used by local dev mode and by tests; it talks to no network.
//
// Time only moves when Tick is called (directly in tests, or by Run on a timer), so a test with a
// fake clock decides exactly when instances boot and terminate.
package fake

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	"github.com/dovetail-dev/dovetail/shared/cloud/aws/userdata"
	"github.com/dovetail-dev/dovetail/shared/repair"
)

// DefaultKubeletVersion is reported by booted nodes when Options.KubeletVersion is empty. It is
// the Kubernetes release matching the k8s.io/api module this repository builds against (v0.37.2).
const DefaultKubeletVersion = "v1.37.2"

// DefaultRegion is the region of the embedded catalog.
const DefaultRegion = "us-east-1"

// maxClientTokenLen is EC2's limit on ClientToken: 64 ASCII characters (EC2 API reference,
// "Ensuring idempotency").
const maxClientTokenLen = 64

// NodeRegistrar receives the Node a booted instance's kubelet registers (local dev mode creates it
// in its cluster). It may be called from Tick's goroutine; it must be safe for concurrent use.
type NodeRegistrar interface {
	RegisterNode(ctx context.Context, node *corev1.Node) error
}

// NodeDeregistrar is optionally implemented by a NodeRegistrar: when an instance terminates the
// fake removes its Node, as the AWS cloud controller manager deletes Nodes whose instance is gone.
type NodeDeregistrar interface {
	DeregisterNode(ctx context.Context, name string) error
}

// Options configure a fake cloud.
type Options struct {
	// Catalog is the cloud's truth: which offerings exist and their prices. Required.
	Catalog *catalog.Catalog
	// Cluster is the cluster this provider launches for and may terminate instances of (the value
	// of the apisv1.TagCluster tag). Required.
	Cluster string
	// Region defaults to the catalog's region, else DefaultRegion.
	Region string
	// BootDelay is how long an instance stays pending before it runs and registers its Node.
	BootDelay time.Duration
	// TerminateDelay is how long a deleted instance stays shutting-down before it is terminated.
	TerminateDelay time.Duration
	// Clock is the time source (k8s.io/utils/clock; tests pass a fake clock). Defaults to the real clock.
	Clock clock.Clock
	// Registrar receives booted Nodes; nil means instances boot without registering a Node.
	Registrar NodeRegistrar
	// OnInterruption, if set, is called (outside the fake's lock) for every injected interruption.
	OnInterruption func(Interruption)
	// KubeletVersion is reported in node.status.nodeInfo; defaults to DefaultKubeletVersion.
	KubeletVersion string
	// Logger receives Run's errors; defaults to slog.Default().
	Logger *slog.Logger
	// RepairPolicies are what RepairPolicies returns: those of the cloud the fake stands for
	// (aws.RepairPolicies with an EC2 catalog, azure.RepairPolicies with an Azure one; the fake
	// cannot import them). Nil: the fake repairs nothing.
	RepairPolicies []repair.Policy
}

// Stats counts what the fake was asked to do, so tests can assert e.g. "launched nothing twice".
type Stats struct {
	CreateCalls       int // every Create call, successful or not
	Launches          int // instances actually started
	IdempotentReplays int // Create calls answered with the instance of an earlier ClientToken
	ICEs              int // offerings refused for capacity inside Create calls (one per offering)
	ICEErrors         int // Create calls that returned *cloud.InsufficientCapacityError
	Deletes           int // instances moved to shutting-down by Delete
	Registrations     int // Nodes registered through the Registrar
	Interruptions     int // interruption notices given
}

// Cloud is the fake. Safe for concurrent use.
type Cloud struct {
	catalog        *catalog.Catalog
	cluster        string
	region         string
	repair         []repair.Policy // Options.RepairPolicies
	bootDelay      time.Duration
	terminateDelay time.Duration
	clock          clock.Clock
	registrar      NodeRegistrar
	onInterruption func(Interruption)
	kubeletVersion string
	logger         *slog.Logger

	mu            sync.Mutex
	instances     map[string]*instance // by instance ID
	tokens        map[string]tokenRecord
	ice           []iceRule
	pools         []*capacityPool
	bootFailures  []Pattern
	nextHost      map[string]int // per zone: next host index in the zone's subnet
	interruptions []Interruption
	stats         Stats
	// reservations are the account's capacity reservations, by id.
	reservations map[string]*CapacityReservation
}

// instance is the fake's record of one instance.
type instance struct {
	cloud.Instance
	nodeName   string
	privateIP  netip.Addr
	labels     map[string]string
	taints     []corev1.Taint
	settings   catalog.NodeSettings
	osImage    string
	bootAt     time.Time
	registered bool
	// neverJoins: an injected boot failure; the instance runs but no Node registers.
	neverJoins bool
	// awaitsProvisioning: an Azure VM whose node image waits for its provisioning command (the
	// CustomScript extension of bootstrappingclient mode); no Node until ProvisionVM.
	awaitsProvisioning bool
	// registering is set while Tick calls the registrar outside the lock, so concurrent Ticks
	// do not register the same Node twice.
	registering bool
	terminateAt time.Time // set when shutting down
	reclaimAt   time.Time // set by a spot interruption
}

// tokenRecord is what a ClientToken launched, with the digest of the parameters it came with.
type tokenRecord struct {
	digest     string
	instanceID string
}

var _ cloud.Provider = (*Cloud)(nil)

// New returns a fake cloud. It panics only on a programming error: a nil Catalog or empty Cluster.
func New(opts Options) *Cloud {
	if opts.Catalog == nil {
		panic("fake.New: Options.Catalog is required")
	}
	if opts.Cluster == "" {
		panic("fake.New: Options.Cluster is required")
	}
	c := &Cloud{
		catalog:        opts.Catalog,
		cluster:        opts.Cluster,
		region:         opts.Region,
		bootDelay:      opts.BootDelay,
		terminateDelay: opts.TerminateDelay,
		clock:          opts.Clock,
		registrar:      opts.Registrar,
		onInterruption: opts.OnInterruption,
		kubeletVersion: opts.KubeletVersion,
		logger:         opts.Logger,
		repair:         append([]repair.Policy(nil), opts.RepairPolicies...),
		instances:      map[string]*instance{},
		tokens:         map[string]tokenRecord{},
		nextHost:       map[string]int{},
	}
	if c.region == "" {
		c.region = opts.Catalog.Region
	}
	if c.region == "" {
		c.region = DefaultRegion
	}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	if c.kubeletVersion == "" {
		c.kubeletVersion = DefaultKubeletVersion
	}
	if c.logger == nil {
		c.logger = slog.Default()
	}
	return c
}

// Name is "fake".
func (c *Cloud) Name() string { return "fake" }

// RepairPolicies implements cloud.Repairer with Options.RepairPolicies.
func (c *Cloud) RepairPolicies() []repair.Policy { return append([]repair.Policy(nil), c.repair...) }

// Stats returns a copy of the call counters.
func (c *Cloud) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats
}

// Create launches one instance for req, as an EC2 CreateFleet "instant" request whose overrides
// are req.Offerings:
//
//   - Capacity type first: reserved, then spot, then on-demand. Karpenter does the same: when a
//     NodeClaim allows spot it launches spot and only falls back to on-demand when no spot offering
//     can be had. (Karpenter falls back on its next attempt after caching the ICE; the fake does it
//     within the one call, which ends in the same instance.)
//   - Within a capacity type, the lowest catalog price wins (EC2 Fleet "lowest-price" for
//     on-demand; "price-capacity-optimized" for spot, which here means the lowest price among
//     offerings that have capacity). Ties keep the request's order.
//   - Offerings the catalog lacks (code Unsupported), marks unavailable, or that match an
//     InjectICE rule are skipped and reported. When none is left, the error is a
//     *cloud.InsufficientCapacityError listing every refused offering with its code.
//
// The same ClientToken returns the same instance (in its current state) without launching again;
// the same token with different parameters wraps cloud.ErrIdempotentParameterMismatch. A failed
// request is not remembered, so a retry with the same token tries again. Invalid requests (no
// token, a missing or foreign cluster tag, unknown instance type or capacity type, labels or taints
// a kubelet could not register, an invalid NodeClass kubelet block) return an error naming the
// field and launch nothing.
func (c *Cloud) Create(ctx context.Context, req cloud.LaunchRequest) (*cloud.Instance, error) {
	return c.CreateMixed(ctx, []cloud.LaunchRequest{req})
}

// CreateMixed is Create for a fleet whose launch templates boot different node configurations
// (EC2 accepts a CreateFleet whose LaunchTemplateConfigs name templates with different images
// and user data, e.g. one per architecture). Each request carries the offerings of one
// configuration and the same ClientToken; the cheapest offering with capacity across all of
// them launches, and its instance boots with the configuration of the request that named it.
// The token is remembered with a digest of every request. Errors are Create's; requests with
// different tokens, or none, are refused.
func (c *Cloud) CreateMixed(ctx context.Context, reqs []cloud.LaunchRequest) (*cloud.Instance, error) {
	return c.createMixed(ctx, reqs, nil)
}

// CreatePrioritized is CreateMixed for a fleet with a prioritized allocation strategy (EC2
// CreateFleet OnDemandOptions prioritized, SpotOptions capacity-optimized-prioritized): the
// offering with the lowest priority number launches first, where it has capacity; offerings
// without a priority come last, cheapest first (CreateFleet API reference,
// FleetLaunchTemplateOverridesRequest.Priority: "The lower the number, the higher the
// priority. If no number is set, the override has the lowest priority."). priority is keyed by
// the offerings as the requests name them (instance type, zone, capacity type, reservation).
func (c *Cloud) CreatePrioritized(ctx context.Context, reqs []cloud.LaunchRequest, priority map[cloud.OfferingRef]float64) (*cloud.Instance, error) {
	if priority == nil {
		priority = map[cloud.OfferingRef]float64{}
	}
	return c.createMixed(ctx, reqs, priority)
}

func (c *Cloud) createMixed(ctx context.Context, reqs []cloud.LaunchRequest, priority map[cloud.OfferingRef]float64) (*cloud.Instance, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(reqs) == 0 {
		return nil, errors.New("launch requests: none")
	}
	settings := make([]catalog.NodeSettings, len(reqs))
	digests := make([]string, len(reqs))
	var offerings []cloud.OfferingRef
	owner := make([]int, 0, len(reqs)) // offerings[i] comes from reqs[owner[i]]
	for i := range reqs {
		req := &reqs[i]
		if req.ClientToken != reqs[0].ClientToken {
			c.count(func(s *Stats) { s.CreateCalls++ })
			return nil, fmt.Errorf("launch requests[%d].clientToken: %q, not the fleet's %q", i, req.ClientToken, reqs[0].ClientToken)
		}
		var err error
		if settings[i], err = c.validate(*req); err != nil {
			c.count(func(s *Stats) { s.CreateCalls++ })
			return nil, err
		}
		if digests[i], err = requestDigest(*req); err != nil {
			return nil, err
		}
		// From here on the request's labels and taints are what the kubelet is given at boot,
		// and the node's ephemeral storage is on the instance store only if the user data
		// asks its boot agent for the RAID0 array.
		boot, err := c.bootConfig(*req, settings[i].AMIFamily)
		if err != nil {
			c.count(func(s *Stats) { s.CreateCalls++ })
			return nil, err
		}
		req.Labels, req.Taints = boot.Labels, boot.Taints
		settings[i].InstanceStoreRAID0 = boot.LocalStorage == userdata.LocalStorageRAID0
		for _, o := range req.Offerings {
			offerings = append(offerings, o)
			owner = append(owner, i)
		}
	}
	digest := digests[0]
	if len(digests) > 1 {
		sum := sha256.Sum256([]byte(strings.Join(digests, "/")))
		digest = hex.EncodeToString(sum[:])
	}
	token := reqs[0].ClientToken

	c.mu.Lock()
	defer c.mu.Unlock()
	c.stats.CreateCalls++
	if rec, ok := c.tokens[token]; ok {
		if rec.digest != digest {
			return nil, fmt.Errorf("%w: clientToken %q was used by an earlier launch (%s) with different parameters",
				cloud.ErrIdempotentParameterMismatch, token, rec.instanceID)
		}
		c.stats.IdempotentReplays++
		out := c.instances[rec.instanceID].snapshot()
		return &out, nil
	}

	var refused []cloud.UnavailableOffering
	for _, cand := range c.candidates(offerings, &refused, priority) {
		if code, iced := c.iceCode(cand.ref); iced {
			refused = append(refused, cloud.UnavailableOffering{Offering: cand.ref, Code: code})
			c.stats.ICEs++
			continue
		}
		if c.poolExhausted(cand.ref) {
			refused = append(refused, cloud.UnavailableOffering{Offering: cand.ref, Code: CodeInsufficientInstanceCapacity})
			c.stats.ICEs++
			continue
		}
		ip, ok := c.allocateIP(cand.ref.Zone)
		if !ok {
			refused = append(refused, cloud.UnavailableOffering{Offering: cand.ref, Code: CodeInsufficientFreeAddresses})
			c.stats.ICEs++
			continue
		}
		k := owner[cand.index]
		c.takeFromPools(cand.ref)
		inst := c.launch(reqs[k], cand, ip, settings[k])
		c.tokens[token] = tokenRecord{digest: digest, instanceID: inst.ID}
		c.stats.Launches++
		out := inst.snapshot()
		return &out, nil
	}
	c.stats.ICEErrors++
	return nil, &cloud.InsufficientCapacityError{Unavailable: refused}
}

// validate checks what EC2 would reject outright, naming the field, and parses the NodeClass
// settings the node will boot with.
func (c *Cloud) validate(req cloud.LaunchRequest) (catalog.NodeSettings, error) {
	var none catalog.NodeSettings
	switch {
	case req.ClientToken == "":
		return none, errors.New("clientToken: required (launches must be idempotent)")
	case len(req.ClientToken) > maxClientTokenLen:
		return none, fmt.Errorf("clientToken: %d characters, EC2 allows at most %d", len(req.ClientToken), maxClientTokenLen)
	}
	for i := 0; i < len(req.ClientToken); i++ {
		if req.ClientToken[i] > 0x7e || req.ClientToken[i] < 0x20 {
			return none, fmt.Errorf("clientToken: byte %d is not printable ASCII", i)
		}
	}
	tag, ok := req.Tags[apisv1.TagCluster]
	switch {
	case !ok || tag == "":
		return none, fmt.Errorf("tags[%q]: required on every launch (only tagged instances can be found and terminated)", apisv1.TagCluster)
	case tag != c.cluster:
		return none, fmt.Errorf("tags[%q]: %q is not this provider's cluster %q", apisv1.TagCluster, tag, c.cluster)
	case req.Cluster != "" && req.Cluster != tag:
		return none, fmt.Errorf("cluster: %q does not match tags[%q] %q", req.Cluster, apisv1.TagCluster, tag)
	}
	if len(req.Offerings) == 0 {
		return none, errors.New("offerings: empty, nothing to launch")
	}
	for i, o := range req.Offerings {
		if c.catalog.Get(o.InstanceType) == nil {
			return none, fmt.Errorf("offerings[%d].instanceType: %q is not in the %s catalog", i, o.InstanceType, c.region)
		}
		switch o.CapacityType {
		case apisv1.CapacityTypeOnDemand, apisv1.CapacityTypeSpot:
			if o.ReservationID != "" {
				return none, fmt.Errorf("offerings[%d].reservationID: %s offerings launch into no capacity reservation", i, o.CapacityType)
			}
		case apisv1.CapacityTypeReserved:
			if o.ReservationID == "" {
				return none, fmt.Errorf("offerings[%d].reservationID: required for capacity type reserved (a launch targets one reservation)", i)
			}
		default:
			return none, fmt.Errorf("offerings[%d].capacityType: %q is not one of on-demand, spot, reserved", i, o.CapacityType)
		}
		if o.Zone == "" {
			return none, fmt.Errorf("offerings[%d].zone: required", i)
		}
	}
	// Refuse labels and taints a kubelet could not register with now, not at boot.
	first := req.Offerings[0]
	probe := cloud.Instance{ID: "i-00000000000000000", InstanceType: first.InstanceType, Zone: first.Zone,
		CapacityType: first.CapacityType, ProviderID: cloud.AWSProviderID(first.Zone, "i-00000000000000000")}
	settings, err := cloud.NodeSettingsFor(req.NodeClass)
	if err != nil {
		return none, fmt.Errorf("nodeClass: %w", err)
	}
	if _, err := cloud.NodeFor(c.catalog.Get(first.InstanceType).ForAMIFamily(settings.AMIFamily), probe, cloud.NodeSpec{
		Name: "ip-10-0-0-4.ec2.internal", Region: c.region, Labels: req.Labels, Taints: req.Taints, Settings: &settings,
	}); err != nil {
		return none, err
	}
	return settings, nil
}

// bootConfig renders the user data the AWS provider gives such an instance and parses it back as
// the node's boot agent does (shared/cloud/aws/userdata: nodeadm's NodeConfig --node-labels and
// --register-with-taints on AL2023, settings.kubernetes.node-labels and node-taints on
// Bottlerocket), so the Node registers with exactly the labels and taints its kubelet is given —
// nothing a launch request merely lists, and assembles the instance store as RAID0 only when
// the user data says so (nodeadm localStorage, bootstrap.sh --local-disks, Bottlerocket's
// ephemeral-storage bootstrap command). A Custom family's own user data gives what it says
// (usually nothing). An error names what could not be rendered (e.g. a Windows family).
func (c *Cloud) bootConfig(req cloud.LaunchRequest, family string) (*userdata.Node, error) {
	if family == "" {
		family = apisv1.AMIFamilyAL2023
	}
	spec := userdata.Spec{Family: family, ClusterName: c.cluster, APIServerEndpoint: "https://kubernetes.default.svc",
		CertificateAuthority: "ZG92ZXRhaWwgZmFrZSBjbG91ZA==", Labels: req.Labels, Taints: req.Taints}
	if nc := req.NodeClass.EC2; nc != nil {
		spec.Kubelet = nc.Spec.Kubelet
		if nc.Spec.UserData != nil {
			spec.Custom = *nc.Spec.UserData
		}
		if p := nc.Spec.InstanceStorePolicy; p != nil {
			spec.InstanceStorePolicy = *p
		}
	}
	ud, err := userdata.Render(spec)
	if err != nil {
		return nil, fmt.Errorf("nodeClass: user data: %w", err)
	}
	node, err := userdata.Parse(family, ud)
	if err != nil {
		return nil, fmt.Errorf("nodeClass: user data: %w", err)
	}
	return node, nil
}

// candidate is an offering the catalog has, with the catalog's price.
type candidate struct {
	ref   cloud.OfferingRef // PricePerHour is the catalog's
	it    *catalog.InstanceType
	index int
}

// capacityTypeRank orders capacity types as Karpenter prefers them: reserved, spot, on-demand.
func capacityTypeRank(ct string) int {
	switch ct {
	case apisv1.CapacityTypeReserved:
		return 0
	case apisv1.CapacityTypeSpot:
		return 1
	default:
		return 2
	}
}

// candidates resolves the requested offerings against the catalog, appends the ones the catalog
// cannot sell to refused, and orders the rest by capacity type, then price, then request order.
func (c *Cloud) candidates(refs []cloud.OfferingRef, refused *[]cloud.UnavailableOffering, priority map[cloud.OfferingRef]float64) []candidate {
	seen := map[cloud.OfferingRef]bool{}
	var out []candidate
	for i, ref := range refs {
		key := cloud.OfferingRef{InstanceType: ref.InstanceType, Zone: ref.Zone, CapacityType: ref.CapacityType, ReservationID: ref.ReservationID}
		if seen[key] {
			continue
		}
		seen[key] = true
		it := c.catalog.Get(ref.InstanceType)
		if ref.CapacityType == apisv1.CapacityTypeReserved {
			// Reserved capacity is the reservation's, not the catalog's: EC2 checks the target.
			key.ReservationType = ref.ReservationType
			cand, code := c.reservedCandidate(key, it)
			if code != "" {
				*refused = append(*refused, cloud.UnavailableOffering{Offering: ref, Code: code})
				c.stats.ICEs++
				continue
			}
			out = append(out, candidate{ref: cand, it: it, index: i})
			continue
		}
		off, ok := findOffering(it, ref.Zone, ref.CapacityType)
		switch {
		case !ok:
			*refused = append(*refused, cloud.UnavailableOffering{Offering: ref, Code: CodeUnsupported})
		case !off.Available:
			*refused = append(*refused, cloud.UnavailableOffering{Offering: ref, Code: CodeInsufficientInstanceCapacity})
			c.stats.ICEs++
		default:
			key.PricePerHour = off.PricePerHour
			out = append(out, candidate{ref: key, it: it, index: i})
		}
	}
	prio := func(cand candidate) (float64, bool) {
		if priority == nil {
			return 0, false
		}
		r := refs[cand.index]
		p, ok := priority[cloud.OfferingRef{InstanceType: r.InstanceType, Zone: r.Zone, CapacityType: r.CapacityType, ReservationID: r.ReservationID}]
		return p, ok
	}
	sort.SliceStable(out, func(a, b int) bool {
		ra, rb := capacityTypeRank(out[a].ref.CapacityType), capacityTypeRank(out[b].ref.CapacityType)
		if ra != rb {
			return ra < rb
		}
		pa, oka := prio(out[a])
		pb, okb := prio(out[b])
		if oka != okb {
			return oka
		}
		if oka && pa != pb {
			return pa < pb
		}
		if out[a].ref.PricePerHour != out[b].ref.PricePerHour {
			return out[a].ref.PricePerHour < out[b].ref.PricePerHour
		}
		return out[a].index < out[b].index
	})
	return out
}

func findOffering(it *catalog.InstanceType, zone, capacityType string) (catalog.Offering, bool) {
	for _, o := range it.Offerings {
		if o.Zone == zone && o.CapacityType == capacityType {
			return o, true
		}
	}
	return catalog.Offering{}, false
}

// launch records a new pending instance. Called with c.mu held.
func (c *Cloud) launch(req cloud.LaunchRequest, cand candidate, ip netip.Addr, settings catalog.NodeSettings) *instance {
	id := c.instanceID(req.ClientToken)
	now := c.clock.Now()
	tags := make(map[string]string, len(req.Tags))
	for k, v := range req.Tags {
		tags[k] = v
	}
	labels := make(map[string]string, len(req.Labels))
	for k, v := range req.Labels {
		labels[k] = v
	}
	inst := &instance{
		Instance: cloud.Instance{
			ID:           id,
			ProviderID:   cloud.AWSProviderID(cand.ref.Zone, id),
			InstanceType: cand.ref.InstanceType,
			Zone:         cand.ref.Zone,
			CapacityType: cand.ref.CapacityType,
			PricePerHour: cand.ref.PricePerHour,
			State:        cloud.StatePending,
			LaunchTime:   now,
			Tags:         tags,
			// An instance launched into a reservation takes one of its instances until it terminates.
			CapacityReservationID:   cand.ref.ReservationID,
			CapacityReservationType: cand.ref.ReservationType,
		},
		nodeName:   cloud.PrivateDNSName(ip, c.region),
		neverJoins: c.bootFails(cand.ref) || !hasIdentity(req.NodeClass),
		privateIP:  ip,
		labels:     labels,
		taints:     append([]corev1.Taint(nil), req.Taints...),
		settings:   settings,
		bootAt:     now.Add(c.bootDelay),
	}
	if req.NodeClass.EC2 != nil {
		inst.osImage = osImage(req.NodeClass.EC2)
	}
	c.instances[id] = inst
	return inst
}

// instanceID derives "i-" + 17 hex digits from the cluster and ClientToken, so the same decision
// gets the same-looking ID in every run; a collision (astronomically unlikely) is resolved by
// rehashing. Called with c.mu held.
func (c *Cloud) instanceID(token string) string {
	seed := c.cluster + "/" + token
	for {
		sum := sha256.Sum256([]byte(seed))
		// Current EC2 IDs start with 0 followed by 16 hex digits.
		id := "i-0" + hex.EncodeToString(sum[:8])
		if _, taken := c.instances[id]; !taken {
			return id
		}
		seed += "'"
	}
}

// osImage names the OS image the NodeClass's AMI family boots, as nodeInfo.osImage shows it;
// empty for Custom.
func osImage(nc *apisv1.EC2NodeClass) string {
	switch nc.AMIFamily() {
	case apisv1.AMIFamilyAL2:
		return "Amazon Linux 2"
	case apisv1.AMIFamilyAL2023:
		return "Amazon Linux 2023"
	case apisv1.AMIFamilyBottlerocket:
		return "Bottlerocket OS"
	case apisv1.AMIFamilyWindows2019:
		return "Windows Server 2019 Datacenter"
	case apisv1.AMIFamilyWindows2022:
		return "Windows Server 2022 Datacenter"
	}
	return ""
}

// subnetHosts is the size of each zone's fake subnet: a /19 (8,192 addresses), as eksctl lays out
// a /16 VPC over its zones.
const subnetHosts = 8192

// allocateIP gives the next private address in the zone's subnet 10.0.(32·z).0/19, where z is the
// zone's letter (us-east-1a → 0). AWS reserves the first four and the last address of every
// subnet (VPC User Guide, "Subnet CIDR blocks"), so hosts run from .4 to the second-to-last.
// Addresses are not reused. Called with c.mu held.
func (c *Cloud) allocateIP(zone string) (netip.Addr, bool) {
	host := c.nextHost[zone]
	if host == 0 {
		host = 4
	}
	if host >= subnetHosts-1 {
		return netip.Addr{}, false
	}
	c.nextHost[zone] = host + 1
	z := zoneIndex(zone)
	third := 32*z + host/256
	return netip.AddrFrom4([4]byte{10, 0, byte(third), byte(host % 256)}), true
}

// zoneIndex maps "us-east-1a".."us-east-1h" to 0..7 and any other name to a stable 0..7.
func zoneIndex(zone string) int {
	if n := len(zone); n > 0 && zone[n-1] >= 'a' && zone[n-1] <= 'z' {
		return int(zone[n-1]-'a') % 8
	}
	h := fnv.New32a()
	h.Write([]byte(zone))
	return int(h.Sum32() % 8)
}

// requestDigest fingerprints the launch parameters EC2 compares for idempotency.
func requestDigest(req cloud.LaunchRequest) (string, error) {
	var nodeClaim, nodeClass string
	if req.NodeClaim != nil {
		nodeClaim = req.NodeClaim.Name
	}
	nodeClass = req.NodeClass.Name()
	b, err := json.Marshal(struct {
		Cluster   string
		NodeClaim string
		NodeClass string
		Offerings []cloud.OfferingRef
		Labels    map[string]string
		Taints    []corev1.Taint
		Tags      map[string]string
	}{req.Cluster, nodeClaim, nodeClass, req.Offerings, req.Labels, req.Taints, req.Tags})
	if err != nil {
		return "", fmt.Errorf("launch request: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// snapshot copies the public view of an instance.
func (i *instance) snapshot() cloud.Instance {
	out := i.Instance
	out.Tags = make(map[string]string, len(i.Tags))
	for k, v := range i.Tags {
		out.Tags[k] = v
	}
	return out
}

// count updates the counters under the lock.
func (c *Cloud) count(f func(*Stats)) {
	c.mu.Lock()
	f(&c.stats)
	c.mu.Unlock()
}

// Get returns the instance with that providerID, or an error wrapping cloud.ErrNotFound. Terminated
// instances are still returned (EC2 keeps showing them for about an hour).
func (c *Cloud) Get(ctx context.Context, providerID string) (*cloud.Instance, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	inst, err := c.lookup(providerID)
	if err != nil {
		return nil, err
	}
	out := inst.snapshot()
	return &out, nil
}

// lookup finds an instance by providerID. Called with c.mu held.
func (c *Cloud) lookup(providerID string) (*instance, error) {
	if strings.HasPrefix(providerID, "azure://") {
		return c.lookupAzure(providerID)
	}
	_, id, err := cloud.ParseAWSProviderID(providerID)
	if err != nil {
		return nil, err
	}
	inst, ok := c.instances[id]
	if !ok || inst.ProviderID != providerID {
		return nil, fmt.Errorf("%s: %w", providerID, cloud.ErrNotFound)
	}
	return inst, nil
}

// List returns the instances tagged apisv1.TagCluster=cluster that are not terminated, sorted by ID.
func (c *Cloud) List(ctx context.Context, cluster string) ([]cloud.Instance, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	out := []cloud.Instance{}
	for _, inst := range c.instances {
		if inst.State != cloud.StateTerminated && inst.Tags[apisv1.TagCluster] == cluster {
			out = append(out, inst.snapshot())
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].ID < out[b].ID })
	return out, nil
}

// Delete starts terminating the instance: it goes shutting-down now and terminated TerminateDelay
// later (on Tick). Only instances whose apisv1.TagCluster tag is this provider's cluster may be
// deleted; others get an error naming the instance and the tag. Deleting an instance that is
// already shutting down or terminated is not an error. An unknown providerID wraps cloud.ErrNotFound.
func (c *Cloud) Delete(ctx context.Context, providerID string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	inst, err := c.lookup(providerID)
	if err != nil {
		return err
	}
	if tag := inst.Tags[apisv1.TagCluster]; tag != c.cluster {
		if tag == "" {
			return fmt.Errorf("%w: refusing to terminate %s: it has no %q tag (not launched for cluster %q)", cloud.ErrNotOwned, inst.ID, apisv1.TagCluster, c.cluster)
		}
		return fmt.Errorf("%w: refusing to terminate %s: its %q tag is %q, not this cluster %q", cloud.ErrNotOwned, inst.ID, apisv1.TagCluster, tag, c.cluster)
	}
	c.shutDown(inst)
	return nil
}

// shutDown moves a pending or running instance to shutting-down. Called with c.mu held.
func (c *Cloud) shutDown(inst *instance) {
	if inst.State == cloud.StateShuttingDown || inst.State == cloud.StateTerminated {
		return
	}
	inst.State = cloud.StateShuttingDown
	inst.terminateAt = c.clock.Now().Add(c.terminateDelay)
	c.stats.Deletes++
}

// AddInstance places an instance the fake did not launch, as if another tool or cluster had: for
// tests of "only our instances are terminated" and orphan handling. ID and Zone are required;
// ProviderID is derived; State defaults to running and LaunchTime to now. It never registers a Node.
func (c *Cloud) AddInstance(inst cloud.Instance) error {
	if !cloud.ValidInstanceID(inst.ID) {
		return fmt.Errorf("id: %q is not i- followed by 17 hex digits", inst.ID)
	}
	if inst.Zone == "" {
		return errors.New("zone: required")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, taken := c.instances[inst.ID]; taken {
		return fmt.Errorf("id: %s already exists", inst.ID)
	}
	rec := &instance{Instance: inst, registered: true}
	rec.ProviderID = cloud.AWSProviderID(inst.Zone, inst.ID)
	if rec.State == "" {
		rec.State = cloud.StateRunning
	}
	if rec.LaunchTime.IsZero() {
		rec.LaunchTime = c.clock.Now()
	}
	rec.Tags = make(map[string]string, len(inst.Tags))
	for k, v := range inst.Tags {
		rec.Tags[k] = v
	}
	c.instances[inst.ID] = rec
	return nil
}

// hasIdentity reports whether instances of the NodeClass get an IAM identity: an instance
// profile (spec.instanceProfile, or the one resolved for spec.role in status). EC2 launches an
// instance with a profile, never with a bare role, so a spec.role class whose profile was not
// resolved yet boots a node whose kubelet cannot authenticate: the fake's never registers either.
func hasIdentity(nc apisv1.NodeClass) bool {
	if nc.EC2 == nil {
		return true // other clouds' identities are not modelled here
	}
	return nc.EC2.Status.InstanceProfile != "" || (nc.EC2.Spec.InstanceProfile != nil && *nc.EC2.Spec.InstanceProfile != "")
}
