package apis

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"

	v1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/apis/validate"
)

// The rules below are Karpenter's: the OpenAPI/CEL rules of its v1 CRDs and its webhook checks
// (kubernetes-sigs/karpenter pkg/apis/v1/nodepool.go, nodeclaim.go, nodeclaim_validation.go;
// aws/karpenter-provider-aws pkg/apis/v1/ec2nodeclass.go). Every function returns all problems,
// each with its field path, and never panics.

// Requirement operators. Gte and Lte are Karpenter's newer inclusive forms of Gt and Lt.
const (
	OpGte corev1.NodeSelectorOperator = "Gte"
	OpLte corev1.NodeSelectorOperator = "Lte"
)

var supportedOps = []string{"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Gte", "Lte"}

const (
	maxRequirements  = 100 // CRD maxItems
	maxMinValues     = 50  // minValues maximum
	maxBudgets       = 50  // disruption.budgets maxItems
	maxSelectorTerms = 30  // selector terms maxItems
	maxBlockDevices  = 50  // blockDeviceMappings maxItems
)

var (
	budgetNodesRe    = regexp.MustCompile(`^((100|[0-9]{1,2})%|[0-9]+)$`)
	budgetDurationRe = regexp.MustCompile(`^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$`)
	subnetIDRe       = regexp.MustCompile(`^subnet-[0-9a-z]+$`)
	sgIDRe           = regexp.MustCompile(`^sg-[0-9a-z]+$`)
	amiIDRe          = regexp.MustCompile(`^ami-[0-9a-z]+$`)
	crIDRe           = regexp.MustCompile(`^cr-[0-9a-z]+$`)
	pgIDRe           = regexp.MustCompile(`^pg-[0-9a-z]+$`)
	ownerIDRe        = regexp.MustCompile(`^[0-9]{12}$`)
)

// ValidateNodePool checks a (defaulted) NodePool: template labels, requirements, taints,
// nodeClassRef, disruption (policy, budgets with cron schedules), weight 1-100, limits, replicas.
func ValidateNodePool(np *v1.NodePool) field.ErrorList {
	if np == nil {
		return field.ErrorList{field.Required(field.NewPath("spec"), "no NodePool")}
	}
	var errs field.ErrorList
	spec := field.NewPath("spec")
	errs = append(errs, validateName(np.Name)...)
	tmpl := spec.Child("template")
	errs = append(errs, validateLabels(np.Spec.Template.ObjectMeta.Labels, tmpl.Child("metadata", "labels"))...)
	errs = append(errs, validate.Annotations(np.Spec.Template.ObjectMeta.Annotations, tmpl.Child("metadata", "annotations"))...)
	errs = append(errs, validateNodeClaimSpec(&np.Spec.Template.Spec, tmpl.Child("spec"), true)...)
	if len(np.Spec.Template.Spec.Resources.Requests) > 0 {
		errs = append(errs, field.Forbidden(tmpl.Child("spec", "resources"), "a NodePool template cannot set resources; NodeClaims are sized by their pods"))
	}
	errs = append(errs, validateDisruption(&np.Spec.Disruption, spec.Child("disruption"))...)
	if w := np.Spec.Weight; w != nil && (*w < 1 || *w > 100) {
		errs = append(errs, field.Invalid(spec.Child("weight"), *w, "must be between 1 and 100 (leave unset for 0)"))
	}
	if _, _, err := v1.MaxPricePerHour(np); err != nil {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "annotations").Key(v1.AnnotationMaxPricePerHour),
			np.Annotations[v1.AnnotationMaxPricePerHour], "must be a non-negative number of USD per hour"))
	}
	for _, name := range sortedKeys(np.Spec.Limits) {
		q := np.Spec.Limits[corev1.ResourceName(name)]
		if q.Sign() < 0 {
			errs = append(errs, field.Invalid(spec.Child("limits").Key(name), q.String(), "must not be negative"))
		}
	}
	if r := np.Spec.Replicas; r != nil {
		if *r < 0 {
			errs = append(errs, field.Invalid(spec.Child("replicas"), *r, "must not be negative"))
		}
		// The NodePool CRD's CEL rules for static NodePools (infra/crds/karpenter.sh_nodepools.yaml,
		// Karpenter v1.14), with their messages.
		if np.Spec.Weight != nil {
			errs = append(errs, field.Forbidden(spec.Child("weight"), "'weight' is not supported on static NodePools"))
		}
		for _, name := range sortedKeys(np.Spec.Limits) {
			if name != "nodes" {
				errs = append(errs, field.Forbidden(spec.Child("limits").Key(name), "only 'limits.nodes' is supported on static NodePools"))
			}
		}
	}
	return errs
}

// ValidateNodeClaim checks a NodeClaim's requirements, taints and nodeClassRef.
func ValidateNodeClaim(nc *v1.NodeClaim) field.ErrorList {
	if nc == nil {
		return field.ErrorList{field.Required(field.NewPath("spec"), "no NodeClaim")}
	}
	errs := validateName(nc.Name)
	errs = append(errs, validateLabels(nc.Labels, field.NewPath("metadata", "labels"), allowAll)...)
	// A NodeClaim's requirements carry the labels Dovetail itself assigns (karpenter.sh/nodepool),
	// so the restricted-label rule, which guards user-written NodePools, does not apply.
	return append(errs, validateNodeClaimSpec(&nc.Spec, field.NewPath("spec"), false)...)
}

func validateName(name string) field.ErrorList {
	return validate.Name(name, field.NewPath("metadata", "name"))
}

// allowAll skips the restricted-domain check (a NodeClaim carries Dovetail's own labels).
const allowAll = true

// validateLabels applies the API server's label rules (validate.Labels) and, unless
// skipRestricted, Karpenter's restricted label domains.
func validateLabels(labels map[string]string, p *field.Path, skipRestricted ...bool) field.ErrorList {
	errs := validate.Labels(labels, p)
	if len(skipRestricted) == 0 {
		for _, k := range sortedKeys(labels) {
			if r := RestrictedLabelReason(k); r != "" {
				errs = append(errs, field.Forbidden(p.Key(k), r))
			}
		}
	}
	return errs
}

func validateNodeClaimSpec(s *v1.NodeClaimSpec, p *field.Path, restricted bool) field.ErrorList {
	var errs field.ErrorList
	rp := p.Child("requirements")
	if len(s.Requirements) > maxRequirements {
		errs = append(errs, field.TooMany(rp, len(s.Requirements), maxRequirements))
	}
	for i := range s.Requirements {
		errs = append(errs, validateRequirement(s.Requirements[i], rp.Index(i), restricted)...)
	}
	seen := map[string]bool{}
	errs = append(errs, validateTaints(s.Taints, p.Child("taints"), seen)...)
	errs = append(errs, validateTaints(s.StartupTaints, p.Child("startupTaints"), seen)...)
	ref := p.Child("nodeClassRef")
	if s.NodeClassRef == nil {
		errs = append(errs, field.Required(ref, "must reference a NodeClass (group, kind, name)"))
	} else {
		r := s.NodeClassRef
		if r.Name == "" {
			errs = append(errs, field.Required(ref.Child("name"), ""))
		}
		if r.Kind == "" {
			errs = append(errs, field.Required(ref.Child("kind"), ""))
		}
		if r.Group == "" {
			errs = append(errs, field.Required(ref.Child("group"), ""))
		} else if strings.Contains(r.Group, "/") {
			errs = append(errs, field.Invalid(ref.Child("group"), r.Group, "must be an API group without a version (karpenter.k8s.aws, not karpenter.k8s.aws/v1)"))
		}
	}
	if g := s.TerminationGracePeriod; g != nil && g.Duration < 0 {
		errs = append(errs, field.Invalid(p.Child("terminationGracePeriod"), g.Duration.String(), "must not be negative"))
	}
	if d := s.ExpireAfter.Duration; d != nil && *d < 0 {
		errs = append(errs, field.Invalid(p.Child("expireAfter"), d.String(), "must not be negative"))
	}
	return errs
}

// ValidateRequirement checks one NodePool/NodeClaim requirement at path p: key (qualified name,
// not restricted), operator (In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte, Lte), values per
// operator (In at least one; Gt/Lt/Gte/Lte exactly one non-negative integer; Exists and
// DoesNotExist none), each value a valid label value, and minValues (1-50, at most the number
// of In values).
func ValidateRequirement(r v1.NodeSelectorRequirementWithMinValues, p *field.Path) field.ErrorList {
	return validateRequirement(r, p, true)
}

func validateRequirement(r v1.NodeSelectorRequirementWithMinValues, p *field.Path, restricted bool) field.ErrorList {
	var errs field.ErrorList
	kp, vp := p.Child("key"), p.Child("values")
	if r.Key == "" {
		errs = append(errs, field.Required(kp, ""))
	} else {
		errs = append(errs, validate.QualifiedName(r.Key, kp)...)
		if reason := RestrictedLabelReason(r.Key); restricted && reason != "" {
			errs = append(errs, field.Forbidden(kp, reason))
		}
	}
	switch op := r.Operator; op {
	case corev1.NodeSelectorOpIn:
		if len(r.Values) == 0 {
			errs = append(errs, field.Required(vp, "operator In needs at least one value"))
		}
	case corev1.NodeSelectorOpNotIn:
	case corev1.NodeSelectorOpExists, corev1.NodeSelectorOpDoesNotExist:
		if len(r.Values) > 0 {
			errs = append(errs, field.Forbidden(vp, fmt.Sprintf("operator %s takes no values", op)))
		}
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt, OpGte, OpLte:
		if len(r.Values) != 1 {
			errs = append(errs, field.Invalid(vp, r.Values, fmt.Sprintf("operator %s needs exactly one non-negative integer value", op)))
		} else if n, err := strconv.ParseInt(r.Values[0], 10, 64); err != nil || n < 0 {
			errs = append(errs, field.Invalid(vp.Index(0), r.Values[0], fmt.Sprintf("operator %s needs a non-negative integer", op)))
		}
	case "":
		errs = append(errs, field.Required(p.Child("operator"), ""))
	default:
		errs = append(errs, field.NotSupported(p.Child("operator"), string(op), supportedOps))
	}
	for i, v := range r.Values {
		errs = append(errs, validate.LabelValue(v, vp.Index(i))...)
	}
	if mv := r.MinValues; mv != nil {
		mp := p.Child("minValues")
		switch {
		case *mv < 1 || *mv > maxMinValues:
			errs = append(errs, field.Invalid(mp, *mv, "must be between 1 and 50"))
		case r.Operator == corev1.NodeSelectorOpIn && *mv > len(r.Values):
			errs = append(errs, field.Invalid(mp, *mv, fmt.Sprintf("exceeds the %d values given; an In requirement must list at least minValues values", len(r.Values))))
		}
	}
	return errs
}

// validateTaints applies the API server's taint rules (validate.Taints): key, value, effect, and
// unique key and effect pairs across the lists sharing seen.
func validateTaints(taints []corev1.Taint, p *field.Path, seen map[string]bool) field.ErrorList {
	return validate.Taints(taints, p, seen)
}

func validateDisruption(d *v1.Disruption, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch d.ConsolidationPolicy {
	case v1.ConsolidationPolicyWhenEmpty, v1.ConsolidationPolicyWhenEmptyOrUnderutilized, v1.ConsolidationPolicyBalanced:
	case v1.ConsolidationPolicyWhenUnderutilized:
		errs = append(errs, field.Invalid(p.Child("consolidationPolicy"), d.ConsolidationPolicy,
			"WhenUnderutilized is the karpenter.sh/v1beta1 name; in v1 use WhenEmptyOrUnderutilized (or set apiVersion karpenter.sh/v1beta1 to have it converted)"))
	default:
		errs = append(errs, field.NotSupported(p.Child("consolidationPolicy"), d.ConsolidationPolicy,
			[]string{v1.ConsolidationPolicyWhenEmpty, v1.ConsolidationPolicyWhenEmptyOrUnderutilized, v1.ConsolidationPolicyBalanced}))
	}
	if d.ConsolidateAfter == nil || !d.ConsolidateAfter.IsSet() {
		errs = append(errs, field.Required(p.Child("consolidateAfter"), "a duration (\"30s\") or \"Never\""))
	}
	switch d.ConsolidateWhen {
	case "", "WhenEmpty", "WhenEmptyOrUnderutilized", "WhenCostJustifiesDisruption":
	default:
		errs = append(errs, field.NotSupported(p.Child("consolidateWhen"), d.ConsolidateWhen, []string{"WhenEmpty", "WhenEmptyOrUnderutilized", "WhenCostJustifiesDisruption"}))
	}
	if r := d.DecisionRatioThreshold; r != nil {
		if *r <= 0 {
			errs = append(errs, field.Invalid(p.Child("decisionRatioThreshold"), *r, "must be greater than 0"))
		}
		if d.ConsolidateWhen != "WhenCostJustifiesDisruption" {
			errs = append(errs, field.Forbidden(p.Child("decisionRatioThreshold"), "only meaningful with consolidateWhen=WhenCostJustifiesDisruption"))
		}
	}
	bp := p.Child("budgets")
	if len(d.Budgets) > maxBudgets {
		errs = append(errs, field.TooMany(bp, len(d.Budgets), maxBudgets))
	}
	for i, b := range d.Budgets {
		errs = append(errs, ValidateBudget(b, bp.Index(i))...)
	}
	return errs
}

// ValidateBudget checks one disruption budget at path p: nodes is a count ("5") or a percentage
// 0-100% ("10%"); schedule is a standard 5-field cron expression or @hourly/@daily/... (UTC,
// no TZ prefix); schedule and duration are both set or both unset; duration is whole minutes
// or hours; reasons are Underutilized, Empty or Drifted.
func ValidateBudget(b v1.Budget, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if !budgetNodesRe.MatchString(b.Nodes) {
		errs = append(errs, field.Invalid(p.Child("nodes"), b.Nodes, "must be a node count (\"5\") or a percentage from 0% to 100% (\"10%\")"))
	}
	if b.Schedule != nil {
		s := strings.TrimSpace(*b.Schedule)
		if strings.HasPrefix(s, "TZ=") || strings.HasPrefix(s, "CRON_TZ=") {
			errs = append(errs, field.Invalid(p.Child("schedule"), *b.Schedule, "time zones are not supported; schedules are UTC"))
		} else if _, err := cron.ParseStandard(s); err != nil {
			errs = append(errs, field.Invalid(p.Child("schedule"), *b.Schedule, "not a cron schedule: "+err.Error()))
		}
	}
	if (b.Schedule == nil) != (b.Duration == nil) {
		missing := "duration"
		if b.Schedule == nil {
			missing = "schedule"
		}
		errs = append(errs, field.Required(p.Child(missing), "schedule and duration must be set together"))
	}
	if b.Duration != nil {
		d := b.Duration.Duration
		if d < 0 || d%time.Minute != 0 || !budgetDurationRe.MatchString(d.String()) {
			errs = append(errs, field.Invalid(p.Child("duration"), d.String(), "must be whole minutes or hours (\"1h30m\"); cron has no seconds"))
		}
	}
	for i, r := range b.Reasons {
		switch r {
		case v1.DisruptionReasonUnderutilized, v1.DisruptionReasonEmpty, v1.DisruptionReasonDrifted:
		default:
			errs = append(errs, field.NotSupported(p.Child("reasons").Index(i), r, []string{v1.DisruptionReasonUnderutilized, v1.DisruptionReasonEmpty, v1.DisruptionReasonDrifted}))
		}
	}
	return errs
}

// ValidateEC2NodeClass checks a (defaulted) EC2NodeClass: selector terms, AMI selection (alias
// format and exclusivity, amiFamily agreement), role xor instanceProfile, tags, metadata options,
// block devices and kubelet settings.
func ValidateEC2NodeClass(nc *v1.EC2NodeClass) field.ErrorList {
	if nc == nil {
		return field.ErrorList{field.Required(field.NewPath("spec"), "no EC2NodeClass")}
	}
	errs := validateName(nc.Name)
	s := &nc.Spec
	p := field.NewPath("spec")

	sp := p.Child("subnetSelectorTerms")
	if len(s.SubnetSelectorTerms) == 0 {
		errs = append(errs, field.Required(sp, "at least one term (id or tags)"))
	}
	if len(s.SubnetSelectorTerms) > maxSelectorTerms {
		errs = append(errs, field.TooMany(sp, len(s.SubnetSelectorTerms), maxSelectorTerms))
	}
	for i, t := range s.SubnetSelectorTerms {
		tp := sp.Index(i)
		errs = append(errs, validateTags(t.Tags, tp.Child("tags"))...)
		switch {
		case t.ID == "" && len(t.Tags) == 0 && t.CIDR == "":
			errs = append(errs, field.Required(tp, "expected one of id, tags, cidr"))
		case t.ID != "" && (len(t.Tags) > 0 || t.CIDR != ""):
			errs = append(errs, field.Forbidden(tp.Child("id"), "id is mutually exclusive with the other fields of a subnet selector term"))
		}
		if t.ID != "" && !subnetIDRe.MatchString(t.ID) {
			errs = append(errs, field.Invalid(tp.Child("id"), t.ID, "must look like subnet-0123abcd"))
		}
	}

	gp := p.Child("securityGroupSelectorTerms")
	if len(s.SecurityGroupSelectorTerms) == 0 {
		errs = append(errs, field.Required(gp, "at least one term (id, name or tags)"))
	}
	if len(s.SecurityGroupSelectorTerms) > maxSelectorTerms {
		errs = append(errs, field.TooMany(gp, len(s.SecurityGroupSelectorTerms), maxSelectorTerms))
	}
	for i, t := range s.SecurityGroupSelectorTerms {
		tp := gp.Index(i)
		errs = append(errs, validateTags(t.Tags, tp.Child("tags"))...)
		switch {
		case t.ID == "" && t.Name == "" && len(t.Tags) == 0:
			errs = append(errs, field.Required(tp, "expected one of id, name, tags"))
		case t.ID != "" && (t.Name != "" || len(t.Tags) > 0):
			errs = append(errs, field.Forbidden(tp.Child("id"), "id is mutually exclusive with the other fields of a security group selector term"))
		case t.Name != "" && len(t.Tags) > 0:
			errs = append(errs, field.Forbidden(tp.Child("name"), "name is mutually exclusive with the other fields of a security group selector term"))
		}
		if t.ID != "" && !sgIDRe.MatchString(t.ID) {
			errs = append(errs, field.Invalid(tp.Child("id"), t.ID, "must look like sg-0123abcd"))
		}
	}

	// placementGroupSelector: the CRD's CEL rules (one of name or id, not both; id ^pg-[0-9a-z]+$,
	// name at least 1 character), karpenter-provider-aws pkg/apis/v1/ec2nodeclass.go.
	if pg := s.PlacementGroupSelector; pg != nil {
		pp := p.Child("placementGroupSelector")
		switch {
		case pg.ID == "" && pg.Name == "":
			errs = append(errs, field.Required(pp, "expected at least one, got none, ['name', 'id']"))
		case pg.ID != "" && pg.Name != "":
			errs = append(errs, field.Forbidden(pp, "'name' and 'id' are mutually exclusive"))
		}
		if pg.ID != "" && !pgIDRe.MatchString(pg.ID) {
			errs = append(errs, field.Invalid(pp.Child("id"), pg.ID, "must match ^pg-[0-9a-z]+$"))
		}
	}

	cp := p.Child("capacityReservationSelectorTerms")
	if len(s.CapacityReservationSelectorTerms) > maxSelectorTerms {
		errs = append(errs, field.TooMany(cp, len(s.CapacityReservationSelectorTerms), maxSelectorTerms))
	}
	for i, t := range s.CapacityReservationSelectorTerms {
		tp := cp.Index(i)
		errs = append(errs, validateTags(t.Tags, tp.Child("tags"))...)
		switch {
		case t.ID == "" && len(t.Tags) == 0 && t.InstanceMatchCriteria == "":
			errs = append(errs, field.Required(tp, "expected one of id, tags, instanceMatchCriteria"))
		case t.ID != "" && (len(t.Tags) > 0 || t.OwnerID != "" || t.InstanceMatchCriteria != ""):
			errs = append(errs, field.Forbidden(tp.Child("id"), "id is mutually exclusive with the other fields of a capacity reservation selector term"))
		}
		if t.ID != "" && !crIDRe.MatchString(t.ID) {
			errs = append(errs, field.Invalid(tp.Child("id"), t.ID, "must look like cr-0123abcd"))
		}
		if t.OwnerID != "" && !ownerIDRe.MatchString(t.OwnerID) {
			errs = append(errs, field.Invalid(tp.Child("ownerID"), t.OwnerID, "must be a 12-digit AWS account id"))
		}
		if m := t.InstanceMatchCriteria; m != "" && m != "open" && m != "targeted" {
			errs = append(errs, field.NotSupported(tp.Child("instanceMatchCriteria"), m, []string{"open", "targeted"}))
		}
	}

	errs = append(errs, validateAMISelection(s, p)...)

	switch {
	case s.Role == "" && s.InstanceProfile == nil:
		errs = append(errs, field.Required(p.Child("role"), "exactly one of role and instanceProfile must be set"))
	case s.Role != "" && s.InstanceProfile != nil:
		errs = append(errs, field.Forbidden(p.Child("instanceProfile"), "exactly one of role and instanceProfile must be set"))
	case s.InstanceProfile != nil && *s.InstanceProfile == "":
		errs = append(errs, field.Required(p.Child("instanceProfile"), "cannot be empty"))
	}

	for _, k := range sortedKeys(s.Tags) {
		if reason := restrictedTagReason(k); reason != "" {
			errs = append(errs, field.Forbidden(p.Child("tags").Key(k), reason))
		}
	}
	if n := s.IPPrefixCount; n != nil && *n < 0 {
		errs = append(errs, field.Invalid(p.Child("ipPrefixCount"), *n, "must not be negative"))
	}
	if sp := s.InstanceStorePolicy; sp != nil && *sp != v1.InstanceStorePolicyRAID0 {
		errs = append(errs, field.NotSupported(p.Child("instanceStorePolicy"), *sp, []string{v1.InstanceStorePolicyRAID0}))
	}
	if m := s.MetadataOptions; m != nil {
		mp := p.Child("metadataOptions")
		errs = append(errs, enum(m.HTTPEndpoint, mp.Child("httpEndpoint"), "enabled", "disabled")...)
		errs = append(errs, enum(m.HTTPProtocolIPv6, mp.Child("httpProtocolIPv6"), "enabled", "disabled")...)
		errs = append(errs, enum(m.HTTPTokens, mp.Child("httpTokens"), "required", "optional")...)
		if h := m.HTTPPutResponseHopLimit; h != nil && (*h < 1 || *h > 64) {
			errs = append(errs, field.Invalid(mp.Child("httpPutResponseHopLimit"), *h, "must be between 1 and 64"))
		}
	}
	errs = append(errs, validateBlockDevices(s.BlockDeviceMappings, p.Child("blockDeviceMappings"))...)
	errs = append(errs, validateKubelet(s.Kubelet, p.Child("kubelet"))...)
	return errs
}

func validateAMISelection(s *v1.EC2NodeClassSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	ap := p.Child("amiSelectorTerms")
	if len(s.AMISelectorTerms) == 0 {
		errs = append(errs, field.Required(ap, "at least one term, e.g. {alias: al2023@latest}"))
	}
	if len(s.AMISelectorTerms) > maxSelectorTerms {
		errs = append(errs, field.TooMany(ap, len(s.AMISelectorTerms), maxSelectorTerms))
	}
	var alias *v1.Alias
	for i, t := range s.AMISelectorTerms {
		tp := ap.Index(i)
		errs = append(errs, validateTags(t.Tags, tp.Child("tags"))...)
		others := len(t.Tags) > 0 || t.Name != "" || t.Owner != ""
		switch {
		case t.Alias == "" && t.ID == "" && t.SSMParameter == "" && len(t.Tags) == 0 && t.Name == "":
			errs = append(errs, field.Required(tp, "expected one of alias, id, name, tags, ssmParameter"))
		case t.ID != "" && (t.Alias != "" || others):
			errs = append(errs, field.Forbidden(tp.Child("id"), "id is mutually exclusive with the other fields of an AMI selector term"))
		case t.Alias != "" && (t.ID != "" || others || t.SSMParameter != ""):
			errs = append(errs, field.Forbidden(tp.Child("alias"), "alias is mutually exclusive with the other fields of an AMI selector term"))
		}
		if t.ID != "" && !amiIDRe.MatchString(t.ID) {
			errs = append(errs, field.Invalid(tp.Child("id"), t.ID, "must look like ami-0123abcd"))
		}
		if t.Alias != "" {
			if len(s.AMISelectorTerms) != 1 {
				errs = append(errs, field.Forbidden(tp.Child("alias"), "an alias term must be the only amiSelectorTerm"))
			}
			if len(t.Alias) > 30 {
				errs = append(errs, field.TooLong(tp.Child("alias"), t.Alias, 30))
			}
			a, err := v1.ParseAlias(t.Alias)
			if err != nil {
				errs = append(errs, field.Invalid(tp.Child("alias"), t.Alias, err.Error()))
			} else {
				alias = &a
			}
		}
	}
	fp := p.Child("amiFamily")
	families := []string{v1.AMIFamilyAL2, v1.AMIFamilyAL2023, v1.AMIFamilyBottlerocket, v1.AMIFamilyCustom, v1.AMIFamilyWindows2019, v1.AMIFamilyWindows2022, v1.AMIFamilyWindows2025}
	if s.AMIFamily != nil {
		f := *s.AMIFamily
		known := false
		for _, k := range families {
			known = known || k == f
		}
		switch {
		case !known:
			errs = append(errs, field.NotSupported(fp, f, families))
		case alias != nil && f != alias.Family && f != v1.AMIFamilyCustom:
			errs = append(errs, field.Invalid(fp, f, fmt.Sprintf("must be %s or Custom with alias %s", alias.Family, alias)))
		}
	} else if alias == nil && len(s.AMISelectorTerms) > 0 {
		errs = append(errs, field.Required(fp, "required when amiSelectorTerms has no alias"))
	}
	return errs
}

func validateTags(tags map[string]string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, k := range sortedKeys(tags) {
		if k == "" || tags[k] == "" {
			errs = append(errs, field.Invalid(p.Key(k), tags[k], "empty tag keys or values are not supported"))
		}
	}
	return errs
}

// restrictedTagReason: tags Karpenter owns on the instances it launches (EC2NodeClass CEL rules).
func restrictedTagReason(k string) string {
	switch {
	case k == "":
		return "empty tag keys are not supported"
	case k == "eks:eks-cluster-name", k == v1.TagNodePool, k == v1.TagNodeClaim, k == v1.LabelEC2NodeClass, k == v1.TagCluster:
		return fmt.Sprintf("tag %q is set by Dovetail and restricted", k)
	case strings.HasPrefix(k, "kubernetes.io/cluster"):
		return "tags matching kubernetes.io/cluster/ are restricted"
	}
	return ""
}

func validateBlockDevices(bdms []v1.BlockDeviceMapping, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(bdms) > maxBlockDevices {
		errs = append(errs, field.TooMany(p, len(bdms), maxBlockDevices))
	}
	roots := 0
	volumeTypes := []string{"standard", "io1", "io2", "gp2", "sc1", "st1", "gp3"}
	for i, b := range bdms {
		bp := p.Index(i)
		if b.RootVolume {
			roots++
			if roots > 1 {
				errs = append(errs, field.Forbidden(bp.Child("rootVolume"), "only one block device may be the root volume"))
			}
		}
		e := b.EBS
		if e == nil {
			continue
		}
		ep := bp.Child("ebs")
		if e.SnapshotID == nil && e.VolumeSize == nil {
			errs = append(errs, field.Required(ep.Child("volumeSize"), "snapshotID or volumeSize must be set"))
		}
		if e.VolumeSize != nil && e.VolumeSize.Cmp(resource.MustParse("1Gi")) < 0 {
			errs = append(errs, field.Invalid(ep.Child("volumeSize"), e.VolumeSize.String(), "must be at least 1Gi"))
		}
		errs = append(errs, enum(e.VolumeType, ep.Child("volumeType"), volumeTypes...)...)
		if r := e.VolumeInitializationRate; r != nil {
			if *r < 100 || *r > 300 {
				errs = append(errs, field.Invalid(ep.Child("volumeInitializationRate"), *r, "must be between 100 and 300 MiB/s"))
			}
			if e.SnapshotID == nil || *e.SnapshotID == "" {
				errs = append(errs, field.Required(ep.Child("snapshotID"), "must be set when volumeInitializationRate is set"))
			}
		}
	}
	return errs
}

var (
	reservedResources = []string{"cpu", "memory", "ephemeral-storage", "pid"}
	evictionSignals   = []string{"memory.available", "nodefs.available", "nodefs.inodesFree", "imagefs.available", "imagefs.inodesFree", "pid.available"}
)

// evictionPercent is the percentage half of Karpenter's eviction threshold pattern: at most
// 100, with up to two decimals (karpenter-provider-aws hack/validation/kubelet.sh, the CRD's
// evictionHard and evictionSoft additionalProperties pattern).
var evictionPercent = regexp.MustCompile(`^(\d{1,2}(\.\d{1,2})?|100(\.0{1,2})?)%$`)

// evictionThreshold checks an eviction threshold as Karpenter's CRD does: empty, a percentage
// (evictionPercent) or a quantity (its other half is apimachinery's quantity grammar, so
// resource.ParseQuantity decides it).
func evictionThreshold(v string, p *field.Path) field.ErrorList {
	if v == "" || evictionPercent.MatchString(v) { // the pattern's empty alternative ("||") admits ""
		return nil
	}
	if _, err := resource.ParseQuantity(v); err != nil {
		return field.ErrorList{field.Invalid(p, v, "must be a percentage (at most 100%, two decimals) or a quantity")}
	}
	return nil
}

func validateKubelet(k *v1.KubeletConfiguration, p *field.Path) field.ErrorList {
	if k == nil {
		return nil
	}
	var errs field.ErrorList
	for _, r := range []struct {
		name string
		m    map[string]string
	}{{"systemReserved", k.SystemReserved}, {"kubeReserved", k.KubeReserved}} {
		name, m := r.name, r.m
		for _, key := range sortedKeys(m) {
			kp := p.Child(name).Key(key)
			if !contains(reservedResources, key) {
				errs = append(errs, field.NotSupported(kp, key, reservedResources))
				continue
			}
			q, err := resource.ParseQuantity(m[key])
			if err != nil {
				errs = append(errs, field.Invalid(kp, m[key], "not a quantity"))
			} else if q.Sign() < 0 {
				errs = append(errs, field.Invalid(kp, m[key], "must not be negative"))
			}
		}
	}
	for _, key := range sortedKeys(k.EvictionHard) {
		if !contains(evictionSignals, key) {
			errs = append(errs, field.NotSupported(p.Child("evictionHard").Key(key), key, evictionSignals))
		}
		errs = append(errs, evictionThreshold(k.EvictionHard[key], p.Child("evictionHard").Key(key))...)
	}
	for _, key := range sortedKeys(k.EvictionSoft) {
		if !contains(evictionSignals, key) {
			errs = append(errs, field.NotSupported(p.Child("evictionSoft").Key(key), key, evictionSignals))
		}
		errs = append(errs, evictionThreshold(k.EvictionSoft[key], p.Child("evictionSoft").Key(key))...)
		if _, ok := k.EvictionSoftGracePeriod[key]; !ok {
			errs = append(errs, field.Required(p.Child("evictionSoftGracePeriod").Key(key), "every evictionSoft signal needs a grace period"))
		}
	}
	for _, key := range sortedKeys(k.EvictionSoftGracePeriod) {
		if _, ok := k.EvictionSoft[key]; !ok {
			errs = append(errs, field.Required(p.Child("evictionSoft").Key(key), "every evictionSoftGracePeriod signal needs an evictionSoft threshold"))
		}
	}
	nonNeg := func(v *int32, name string) {
		if v != nil && *v < 0 {
			errs = append(errs, field.Invalid(p.Child(name), *v, "must not be negative"))
		}
	}
	nonNeg(k.MaxPods, "maxPods")
	nonNeg(k.PodsPerCore, "podsPerCore")
	pct := func(v *int32, name string) {
		if v != nil && (*v < 0 || *v > 100) {
			errs = append(errs, field.Invalid(p.Child(name), *v, "must be between 0 and 100"))
		}
	}
	pct(k.ImageGCHighThresholdPercent, "imageGCHighThresholdPercent")
	pct(k.ImageGCLowThresholdPercent, "imageGCLowThresholdPercent")
	if h, l := k.ImageGCHighThresholdPercent, k.ImageGCLowThresholdPercent; h != nil && l != nil && *h <= *l {
		errs = append(errs, field.Invalid(p.Child("imageGCHighThresholdPercent"), *h, "must be greater than imageGCLowThresholdPercent"))
	}
	return errs
}

func enum(v *string, p *field.Path, allowed ...string) field.ErrorList {
	if v == nil || contains(allowed, *v) {
		return nil
	}
	return field.ErrorList{field.NotSupported(p, *v, allowed)}
}
