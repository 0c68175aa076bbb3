package scheduling

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// OpGte and OpLte are the inclusive numeric operators Karpenter accepts in NodePool
// requirements in addition to Kubernetes' Gt and Lt.
const (
	OpGte corev1.NodeSelectorOperator = "Gte"
	OpLte corev1.NodeSelectorOperator = "Lte"
)

// Requirement is the set of values one label key may take, closed under intersection.
//
// A Requirement is either a finite set of values (In; DoesNotExist is the empty set) or the
// complement of one (NotIn; Exists excludes nothing), optionally bounded by integer bounds
// (Gt/Lt, exclusive). AbsentOK says whether a node without the label satisfies it: true for
// NotIn and DoesNotExist, false for In, Exists, Gt and Lt (Kubernetes node selector semantics).
type Requirement struct {
	Key        string
	complement bool
	values     map[string]struct{}
	gt, lt     *int64
	absentOK   bool
	// MinValues is Karpenter's minValues: the offering list must keep at least this many
	// distinct values of the key. Nil when not set.
	MinValues *int
}

// NewRequirement builds a requirement from a node selector operator. Values for Gt/Lt/Gte/Lte
// must be one integer; it returns an error naming the operator and value otherwise.
func NewRequirement(key string, op corev1.NodeSelectorOperator, values ...string) (*Requirement, error) {
	r := &Requirement{Key: key, values: map[string]struct{}{}}
	switch op {
	case corev1.NodeSelectorOpIn:
		for _, v := range values {
			r.values[v] = struct{}{}
		}
	case corev1.NodeSelectorOpNotIn:
		r.complement, r.absentOK = true, true
		for _, v := range values {
			r.values[v] = struct{}{}
		}
	case corev1.NodeSelectorOpExists:
		r.complement = true
	case corev1.NodeSelectorOpDoesNotExist:
		r.absentOK = true
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt, OpGte, OpLte:
		if len(values) != 1 {
			return nil, fmt.Errorf("key %q: operator %s needs exactly one integer value, got %d", key, op, len(values))
		}
		n, err := strconv.ParseInt(values[0], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("key %q: operator %s needs an integer value, got %q", key, op, values[0])
		}
		r.complement = true
		switch op {
		case corev1.NodeSelectorOpGt:
			r.gt = &n
		case OpGte:
			n--
			r.gt = &n
		case corev1.NodeSelectorOpLt:
			r.lt = &n
		case OpLte:
			n++
			r.lt = &n
		}
	default:
		return nil, fmt.Errorf("key %q: unknown operator %q", key, op)
	}
	return r, nil
}

// MustRequirement is NewRequirement for constants known to be valid; it panics otherwise.
func MustRequirement(key string, op corev1.NodeSelectorOperator, values ...string) *Requirement {
	r, err := NewRequirement(key, op, values...)
	if err != nil {
		panic(err)
	}
	return r
}

// Has reports whether a node with label value v satisfies the requirement.
func (r *Requirement) Has(v string) bool {
	if r.gt != nil || r.lt != nil {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return false
		}
		if r.gt != nil && n <= *r.gt {
			return false
		}
		if r.lt != nil && n >= *r.lt {
			return false
		}
	}
	_, in := r.values[v]
	return in != r.complement
}

// AbsentOK reports whether a node without the label satisfies the requirement.
func (r *Requirement) AbsentOK() bool { return r.absentOK }

// IsEmpty reports whether no value can satisfy the requirement (it may still allow absence).
func (r *Requirement) IsEmpty() bool {
	if !r.complement {
		return len(r.values) == 0
	}
	if r.gt != nil && r.lt != nil && *r.lt-*r.gt <= 1 {
		return true
	}
	return false
}

// Unsatisfiable reports whether neither a value nor absence satisfies it.
func (r *Requirement) Unsatisfiable() bool { return r.IsEmpty() && !r.absentOK }

// Values returns the allowed values of a finite requirement, sorted; nil for a complement.
func (r *Requirement) Values() []string {
	if r.complement {
		return nil
	}
	out := make([]string, 0, len(r.values))
	for v := range r.values {
		out = append(out, v)
	}
	sort.Strings(out)
	return out
}

// Single returns the only allowed value when the requirement is a one-value In.
func (r *Requirement) Single() (string, bool) {
	if r.complement || len(r.values) != 1 {
		return "", false
	}
	for v := range r.values {
		return v, true
	}
	return "", false
}

// Intersect returns the requirement both r and o allow. MinValues keeps the larger.
func (r *Requirement) Intersect(o *Requirement) *Requirement {
	out := &Requirement{Key: r.Key, absentOK: r.absentOK && o.absentOK, values: map[string]struct{}{}}
	out.gt = maxPtr(r.gt, o.gt)
	out.lt = minPtr(r.lt, o.lt)
	switch {
	case !r.complement && !o.complement:
		for v := range r.values {
			if _, ok := o.values[v]; ok {
				out.values[v] = struct{}{}
			}
		}
	case !r.complement && o.complement:
		for v := range r.values {
			if _, ok := o.values[v]; !ok {
				out.values[v] = struct{}{}
			}
		}
	case r.complement && !o.complement:
		for v := range o.values {
			if _, ok := r.values[v]; !ok {
				out.values[v] = struct{}{}
			}
		}
	default:
		out.complement = true
		for v := range r.values {
			out.values[v] = struct{}{}
		}
		for v := range o.values {
			out.values[v] = struct{}{}
		}
	}
	if !out.complement && (out.gt != nil || out.lt != nil) {
		// A finite set absorbs the bounds.
		for v := range out.values {
			if !out.Has(v) {
				delete(out.values, v)
			}
		}
		out.gt, out.lt = nil, nil
	}
	switch {
	case r.MinValues == nil:
		out.MinValues = o.MinValues
	case o.MinValues == nil || *r.MinValues >= *o.MinValues:
		out.MinValues = r.MinValues
	default:
		out.MinValues = o.MinValues
	}
	return out
}

// String renders the requirement like a node selector: "key In [a b]", "key Gt 5".
func (r *Requirement) String() string {
	var parts []string
	switch {
	case !r.complement && len(r.values) == 0 && r.absentOK:
		return r.Key + " DoesNotExist"
	case !r.complement:
		parts = append(parts, fmt.Sprintf("%s In %v", r.Key, r.Values()))
	case len(r.values) > 0:
		vals := make([]string, 0, len(r.values))
		for v := range r.values {
			vals = append(vals, v)
		}
		sort.Strings(vals)
		parts = append(parts, fmt.Sprintf("%s NotIn %v", r.Key, vals))
	case r.gt == nil && r.lt == nil:
		parts = append(parts, r.Key+" Exists")
	}
	if r.gt != nil {
		parts = append(parts, fmt.Sprintf("%s Gt %d", r.Key, *r.gt))
	}
	if r.lt != nil {
		parts = append(parts, fmt.Sprintf("%s Lt %d", r.Key, *r.lt))
	}
	return strings.Join(parts, ", ")
}

func maxPtr(a, b *int64) *int64 {
	switch {
	case a == nil:
		return b
	case b == nil || *a >= *b:
		return a
	default:
		return b
	}
}

func minPtr(a, b *int64) *int64 {
	switch {
	case a == nil:
		return b
	case b == nil || *a <= *b:
		return a
	default:
		return b
	}
}

// Requirements is a conjunction of requirements, one per key.
type Requirements map[string]*Requirement

// NewRequirements builds requirements from node selector requirements (ANDed). Beta label
// keys are normalised to their GA names.
func NewRequirements(reqs ...corev1.NodeSelectorRequirement) (Requirements, error) {
	out := Requirements{}
	for _, nsr := range reqs {
		r, err := NewNormalizedRequirement(nsr.Key, nsr.Operator, nsr.Values...)
		if err != nil {
			return nil, err
		}
		out.Add(r)
	}
	return out, nil
}

// FromLabels builds "key In [value]" requirements from a label map (nodeSelector, template labels).
func FromLabels(labels map[string]string) Requirements {
	out := Requirements{}
	for k, v := range labels {
		nk, nv := Normalize(k, []string{v})
		out.Add(MustRequirement(nk, corev1.NodeSelectorOpIn, nv...))
	}
	return out
}

// Add intersects r into the set.
func (rs Requirements) Add(r *Requirement) {
	if cur, ok := rs[r.Key]; ok {
		rs[r.Key] = cur.Intersect(r)
		return
	}
	rs[r.Key] = r
}

// Copy returns a shallow copy (requirements are immutable once built).
func (rs Requirements) Copy() Requirements {
	out := make(Requirements, len(rs))
	for k, v := range rs {
		out[k] = v
	}
	return out
}

// Intersect returns the conjunction of rs and o.
func (rs Requirements) Intersect(o Requirements) Requirements {
	out := rs.Copy()
	for _, r := range o {
		out.Add(r)
	}
	return out
}

// Keys returns the keys sorted.
func (rs Requirements) Keys() []string {
	keys := make([]string, 0, len(rs))
	for k := range rs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Unsatisfiable returns the first (by key) requirement nothing can satisfy, or nil.
func (rs Requirements) Unsatisfiable() *Requirement {
	for _, k := range rs.Keys() {
		if rs[k].Unsatisfiable() {
			return rs[k]
		}
	}
	return nil
}

// MatchLabels checks a concrete label set (an existing node, an instance type's labels) against
// every requirement. It returns nil or an error naming the first failing key.
func (rs Requirements) MatchLabels(labels map[string]string) error {
	for _, k := range rs.Keys() {
		if err := rs[k].matchLabel(labels); err != nil {
			return err
		}
	}
	return nil
}

func (r *Requirement) matchLabel(labels map[string]string) error {
	v, ok := labels[r.Key]
	if !ok {
		if r.absentOK {
			return nil
		}
		return fmt.Errorf("label %q is not set (requirement %s)", r.Key, r)
	}
	if !r.Has(v) {
		return fmt.Errorf("label %s=%s does not satisfy %s", r.Key, v, r)
	}
	return nil
}

// String renders the requirements sorted by key.
func (rs Requirements) String() string {
	parts := make([]string, 0, len(rs))
	for _, k := range rs.Keys() {
		parts = append(parts, rs[k].String())
	}
	return strings.Join(parts, "; ")
}

// NormalizedLabels maps label keys Karpenter reads as another label to that label: the
// deprecated beta keys kubelets still set (sigs.k8s.io/karpenter pkg/apis/v1/labels.go,
// NormalizedLabels) and the CSI drivers' zone keys, which the cloud providers alias onto the
// zone (topology.ebs.csi.aws.com/zone: aws/karpenter-provider-aws pkg/apis/v1/labels.go init;
// topology.disk.csi.azure.com/zone: Azure/karpenter-provider-azure, its CSI zone normalization).
// The EBS driver writes its key into the node affinity of the PersistentVolumes it provisions
// and users write it into StorageClass allowedTopologies; reading it as the zone is what lets
// such a volume's pod be planned at all. This is the one table: shared/apis reads it too.
var NormalizedLabels = map[string]string{
	"beta.kubernetes.io/arch":                  corev1.LabelArchStable,
	"beta.kubernetes.io/os":                    corev1.LabelOSStable,
	"beta.kubernetes.io/instance-type":         corev1.LabelInstanceTypeStable,
	"failure-domain.beta.kubernetes.io/zone":   corev1.LabelTopologyZone,
	"failure-domain.beta.kubernetes.io/region": corev1.LabelTopologyRegion,
	LabelEBSCSIZone:                            corev1.LabelTopologyZone,
	LabelAzureDiskCSIZone:                      corev1.LabelTopologyZone,
}

// The CSI drivers' zone topology keys. Each driver's node plugin reports the node's zone under
// its key (NodeGetInfo accessible topology), and the kubelet copies it onto the Node as a label
// when the plugin registers.
const (
	// LabelEBSCSIZone is the AWS EBS CSI driver's zone key (aws-ebs-csi-driver
	// pkg/driver/node.go, ZoneTopologyKey); its value is the availability zone name (us-east-1a).
	LabelEBSCSIZone = "topology.ebs.csi.aws.com/zone"
	// LabelAzureDiskCSIZone is the Azure Disk CSI driver's zone key (kubernetes-sigs/
	// azuredisk-csi-driver, docs/driver-parameters and topology): "<region>-<n>" (eastus-1) on a
	// zonal VM, "" on a VM created without a zone.
	LabelAzureDiskCSIZone = "topology.disk.csi.azure.com/zone"
)

// NormalizedLabelValues maps, per normalized key, a value an aliased key carries to the value
// the normalized key carries. The Azure Disk CSI driver writes "" for a regional (non-zonal)
// VM or disk, where cloud-provider-azure's topology.kubernetes.io/zone is "0" (its fault
// domain): Karpenter core's NormalizedLabelValues and the Azure provider's registration of
// "" → "0" for the zone. No valid zone is "", so the mapping cannot misread an AWS value.
var NormalizedLabelValues = map[string]map[string]string{
	corev1.LabelTopologyZone: {"": "0"},
}

// NormalizeLabelKey maps an aliased label key to the key it is read as (NormalizedLabels).
func NormalizeLabelKey(k string) string {
	if ga, ok := NormalizedLabels[k]; ok {
		return ga
	}
	return k
}

// Normalize returns the key and values a requirement on key is read as: the key through
// NormalizedLabels and, when the key was an alias, each value through NormalizedLabelValues of
// the normalized key. values is not modified; a new slice is returned only when a value changes.
func Normalize(key string, values []string) (string, []string) {
	nk, ok := NormalizedLabels[key]
	if !ok {
		return key, values
	}
	vm := NormalizedLabelValues[nk]
	if len(vm) == 0 {
		return nk, values
	}
	var out []string
	for i, v := range values {
		if nv, ok := vm[v]; ok {
			if out == nil {
				out = append(make([]string, 0, len(values)), values...)
			}
			out[i] = nv
		}
	}
	if out == nil {
		return nk, values
	}
	return nk, out
}

// NewNormalizedRequirement is NewRequirement on the key and values Normalize reads them as.
func NewNormalizedRequirement(key string, op corev1.NodeSelectorOperator, values ...string) (*Requirement, error) {
	k, v := Normalize(key, values)
	return NewRequirement(k, op, v...)
}

// NodeSelectorRequirements renders the requirement back as node selector requirements
// (ANDed): In or DoesNotExist for a finite set, NotIn/Exists for a complement, plus Gt/Lt for
// bounds. Used to write a NodeClaim's requirements.
func (r *Requirement) NodeSelectorRequirements() []corev1.NodeSelectorRequirement {
	var out []corev1.NodeSelectorRequirement
	switch {
	case !r.complement && len(r.values) > 0:
		return []corev1.NodeSelectorRequirement{{Key: r.Key, Operator: corev1.NodeSelectorOpIn, Values: r.Values()}}
	case !r.complement && r.absentOK:
		return []corev1.NodeSelectorRequirement{{Key: r.Key, Operator: corev1.NodeSelectorOpDoesNotExist}}
	case !r.complement:
		// Unsatisfiable: an In with no values says so.
		return []corev1.NodeSelectorRequirement{{Key: r.Key, Operator: corev1.NodeSelectorOpIn, Values: []string{}}}
	case len(r.values) > 0:
		vals := make([]string, 0, len(r.values))
		for v := range r.values {
			vals = append(vals, v)
		}
		sort.Strings(vals)
		out = append(out, corev1.NodeSelectorRequirement{Key: r.Key, Operator: corev1.NodeSelectorOpNotIn, Values: vals})
	case r.gt == nil && r.lt == nil:
		out = append(out, corev1.NodeSelectorRequirement{Key: r.Key, Operator: corev1.NodeSelectorOpExists})
	}
	if r.gt != nil {
		out = append(out, corev1.NodeSelectorRequirement{Key: r.Key, Operator: corev1.NodeSelectorOpGt, Values: []string{strconv.FormatInt(*r.gt, 10)}})
	}
	if r.lt != nil {
		out = append(out, corev1.NodeSelectorRequirement{Key: r.Key, Operator: corev1.NodeSelectorOpLt, Values: []string{strconv.FormatInt(*r.lt, 10)}})
	}
	return out
}
