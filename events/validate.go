package events

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/apis/validate"
)

// FieldError is one invalid field: Path is the JSON path ("snapshot.nodes[3].metadata.name").
type FieldError struct {
	Path   string
	Reason string
}

func (e *FieldError) Error() string { return e.Path + ": " + e.Reason }

// Bounds of a validation error, so a message of a million bad elements yields a readable error
// of bounded size (every consumer logs it, and the dead-letter reason carries it).
const (
	// MaxFieldErrors is how many field errors are kept; the rest are counted.
	MaxFieldErrors = 20
	// MaxReasonBytes bounds one field error's reason (a value echoed in it is cut).
	MaxReasonBytes = 256
)

// fieldErrs collects FieldErrors (at most MaxFieldErrors, the rest counted); err() joins them
// (errors.Join) so callers can errors.As each.
type fieldErrs struct {
	errs    []error
	dropped int
}

func (f *fieldErrs) add(path, format string, args ...any) {
	if len(f.errs) >= MaxFieldErrors {
		f.dropped++
		return
	}
	reason := fmt.Sprintf(format, args...)
	if len(reason) > MaxReasonBytes {
		reason = reason[:MaxReasonBytes] + "..."
	}
	if len(path) > MaxReasonBytes {
		path = path[:MaxReasonBytes] + "..."
	}
	f.errs = append(f.errs, &FieldError{Path: path, Reason: reason})
}

func (f fieldErrs) err() error {
	if f.dropped > 0 {
		return errors.Join(append(f.errs, fmt.Errorf("and %d more field errors", f.dropped))...)
	}
	return errors.Join(f.errs...)
}

// Capacity types a mark may name (karpenter.sh/capacity-type values).
var capacityTypes = map[string]bool{"on-demand": true, "spot": true, "reserved": true}

// Validate checks the fields decisions rely on, and every Kubernetes value of the snapshot's
// pods, nodes, daemonsets, NodePools and NodeClaims (names, labels, annotations, finalizers,
// taints, tolerations, requirement keys and values, quantities) by the API server's rules
// (shared/apis/validate): a forged or corrupted snapshot is refused before any decision, or any
// node's bootstrap, uses it. Errors are FieldErrors joined with errors.Join, each naming a path
// under "snapshot" ("snapshot.nodePools[0].spec.template.metadata.labels[team]").
func (s *Snapshot) Validate() error {
	var errs fieldErrs
	s.validate("snapshot", &errs)
	return errs.err()
}

func (s *Snapshot) validate(p string, errs *fieldErrs) {
	if s.SchemaVersion != SnapshotSchemaVersion {
		errs.add(p+".schemaVersion", "must be %d, got %d", SnapshotSchemaVersion, s.SchemaVersion)
	}
	if s.Cluster == "" {
		errs.add(p+".cluster", "required")
	} else if !ValidName(s.Cluster) {
		errs.add(p+".cluster", "%q is not an RFC 1123 label", s.Cluster)
	}
	if s.Revision < 0 {
		errs.add(p+".revision", "must be >= 0, got %d", s.Revision)
	}
	if s.Time.IsZero() {
		errs.add(p+".time", "required")
	}
	for i := range s.PendingPods {
		pod := &s.PendingPods[i]
		q := fmt.Sprintf("%s.pendingPods[%d]", p, i)
		checkNamespaced(q, pod.Name, pod.Namespace, errs)
		podValues(q, pod, errs)
		if pod.Spec.NodeName != "" {
			errs.add(q+".spec.nodeName", "a pending pod must not be bound, got %q", pod.Spec.NodeName)
		}
	}
	nodes := make(map[string]bool, len(s.Nodes))
	for i := range s.Nodes {
		q := fmt.Sprintf("%s.nodes[%d].metadata.name", p, i)
		switch name := s.Nodes[i].Name; {
		case name == "":
			errs.add(q, "required")
		case nodes[name]:
			errs.add(q, "duplicate node %q", name)
		default:
			nodes[name] = true
		}
		n := &s.Nodes[i]
		q = fmt.Sprintf("%s.nodes[%d]", p, i)
		metaValues(q, &n.ObjectMeta, errs)
		lazily(errs, q, "spec", func(sp *field.Path) field.ErrorList {
			return validate.Taints(n.Spec.Taints, under(sp, "taints"), nil)
		})
		lazily(errs, q, "status", func(sp *field.Path) field.ErrorList {
			return append(validate.ResourceList(n.Status.Capacity, under(sp, "capacity")),
				validate.ResourceList(n.Status.Allocatable, under(sp, "allocatable"))...)
		})
	}
	for i := range s.Pods {
		pod := &s.Pods[i]
		q := fmt.Sprintf("%s.pods[%d]", p, i)
		checkNamespaced(q, pod.Name, pod.Namespace, errs)
		podValues(q, pod, errs)
		if pod.Spec.NodeName == "" {
			errs.add(q+".spec.nodeName", "required for a bound pod (unbound pods belong in pendingPods)")
		}
	}
	for i := range s.DaemonSets {
		ds := &s.DaemonSets[i]
		q := fmt.Sprintf("%s.daemonSets[%d]", p, i)
		checkNamespaced(q, ds.Name, ds.Namespace, errs)
		metaValues(q, &ds.ObjectMeta, errs)
		tp := field.NewPath(q).Child("spec", "template")
		addAll(errs, validate.Labels(ds.Spec.Template.Labels, tp.Child("metadata", "labels")))
		addAll(errs, validate.PodSpec(&ds.Spec.Template.Spec, tp.Child("spec")))
		addAll(errs, validate.PodResources(&ds.Spec.Template.Spec, tp.Child("spec")))
	}
	for i := range s.LimitRanges {
		checkNamespaced(fmt.Sprintf("%s.limitRanges[%d]", p, i), s.LimitRanges[i].Name, s.LimitRanges[i].Namespace, errs)
	}
	for i := range s.PDBs {
		checkNamespaced(fmt.Sprintf("%s.pdbs[%d]", p, i), s.PDBs[i].Name, s.PDBs[i].Namespace, errs)
	}
	for i := range s.NodePools {
		np := &s.NodePools[i]
		q := fmt.Sprintf("%s.nodePools[%d]", p, i)
		if np.Name == "" {
			errs.add(q+".metadata.name", "required")
		}
		metaValues(q, &np.ObjectMeta, errs)
		root := field.NewPath(q)
		tmpl := root.Child("spec", "template")
		addAll(errs, validate.Labels(np.Spec.Template.ObjectMeta.Labels, tmpl.Child("metadata", "labels")))
		addAll(errs, validate.Annotations(np.Spec.Template.ObjectMeta.Annotations, tmpl.Child("metadata", "annotations")))
		addAll(errs, validate.NodeClaimSpec(&np.Spec.Template.Spec, tmpl.Child("spec")))
		addAll(errs, validate.ResourceList(np.Spec.Limits, root.Child("spec", "limits")))
	}
	for i := range s.NodeClasses {
		if s.NodeClasses[i].Name() == "" {
			errs.add(fmt.Sprintf("%s.nodeClasses[%d].metadata.name", p, i), "required")
		}
	}
	for i := range s.NodeClaims {
		nc := &s.NodeClaims[i]
		q := fmt.Sprintf("%s.nodeClaims[%d]", p, i)
		if nc.Name == "" {
			errs.add(q+".metadata.name", "required")
		}
		metaValues(q, &nc.ObjectMeta, errs)
		addAll(errs, validate.NodeClaimSpec(&nc.Spec, field.NewPath(q).Child("spec")))
	}
	for i := range s.NodeOverlays {
		o := &s.NodeOverlays[i]
		q := fmt.Sprintf("%s.nodeOverlays[%d]", p, i)
		if o.Name == "" {
			errs.add(q+".metadata.name", "required")
		}
		metaValues(q, &o.ObjectMeta, errs)
		// The overlay's own rules (requirements, price formats) are checked where it is resolved
		// and reported in its status, as Karpenter's controller reports them.
		addAll(errs, validate.ResourceList(o.Spec.Capacity, field.NewPath(q).Child("spec", "capacity")))
	}
	for i := range s.ProvisioningRequests {
		validateProvisioningRequest(fmt.Sprintf("%s.provisioningRequests[%d]", p, i), &s.ProvisioningRequests[i], errs)
	}
	for i := range s.PodTemplates {
		pt := &s.PodTemplates[i]
		q := fmt.Sprintf("%s.podTemplates[%d]", p, i)
		checkNamespaced(q, pt.Name, pt.Namespace, errs)
		// Its pods are planned as a DaemonSet's template is: the same checks.
		tp := field.NewPath(q).Child("template")
		addAll(errs, validate.Labels(pt.Template.Labels, tp.Child("metadata", "labels")))
		addAll(errs, validate.PodSpec(&pt.Template.Spec, tp.Child("spec")))
		addAll(errs, validate.PodResources(&pt.Template.Spec, tp.Child("spec")))
	}
	if s.Commitments != nil {
		if err := s.Commitments.Validate(); err != nil {
			errs.add(p+".commitments", "%s", err.Error())
		}
	}
	for i := range s.UnavailableOfferings {
		s.UnavailableOfferings[i].validate(fmt.Sprintf("%s.unavailableOfferings[%d]", p, i), errs)
	}
	if f := s.ClusterFacts; f != nil {
		lazily(errs, p, "clusterFacts", func(fp *field.Path) field.ErrorList {
			return validate.ClusterNetwork(f.KubernetesVersion, f.ClusterDNSIP, f.ServiceCIDR, f.IPFamily, fp)
		})
	}
}

func checkNamespaced(p, name, namespace string, errs *fieldErrs) {
	if name == "" {
		errs.add(p+".metadata.name", "required")
	}
	if namespace == "" {
		errs.add(p+".metadata.namespace", "required")
	}
}

// addAll adds the API server's field errors (shared/apis/validate) to errs, each with its path
// and its reason (the value it refuses is echoed, cut at MaxReasonBytes).
func addAll(errs *fieldErrs, list field.ErrorList) {
	for _, e := range list {
		errs.add(e.Field, "%s", e.ErrorBody())
	}
}

// metaValues checks the syntax of an object's name and namespace (when set: their absence is
// reported by the caller, in the snapshot's words), labels, annotations and finalizers, by the
// API server's rules (shared/apis/validate). p is the object's path, built only when something
// is wrong: a valid value is checked with a nil path and allocates nothing.
func metaValues(p string, m *metav1.ObjectMeta, errs *fieldErrs) {
	check := func(mp *field.Path) field.ErrorList {
		var list field.ErrorList
		if m.Name != "" {
			list = append(list, validate.Name(m.Name, under(mp, "name"))...)
		}
		if m.Namespace != "" {
			list = append(list, validate.Namespace(m.Namespace, under(mp, "namespace"))...)
		}
		list = append(list, validate.Labels(m.Labels, under(mp, "labels"))...)
		list = append(list, validate.Annotations(m.Annotations, under(mp, "annotations"))...)
		return append(list, validate.Finalizers(m.Finalizers, under(mp, "finalizers"))...)
	}
	lazily(errs, p, "metadata", check)
}

// podValues checks a pod's metadata values, scheduling constraints and quantities.
func podValues(p string, pod *corev1.Pod, errs *fieldErrs) {
	metaValues(p, &pod.ObjectMeta, errs)
	lazily(errs, p, "spec", func(sp *field.Path) field.ErrorList {
		return append(validate.PodSpec(&pod.Spec, sp), validate.PodResources(&pod.Spec, sp)...)
	})
}

// lazily runs check with no path, where a valid value allocates nothing (shared/apis/validate
// returns nil without touching the path), and, only when it found something, again with the
// path p.child to report it.
func lazily(errs *fieldErrs, p, child string, check func(*field.Path) field.ErrorList) {
	if len(check(nil)) == 0 {
		return
	}
	addAll(errs, check(field.NewPath(p).Child(child)))
}

// under is p.Child(name), or nil in lazily's first, path-less pass.
func under(p *field.Path, name string) *field.Path {
	if p == nil {
		return nil
	}
	return p.Child(name)
}

func (m *UnavailableOfferingMark) validate(p string, errs *fieldErrs) {
	if m.InstanceType == "" {
		errs.add(p+".instanceType", "required")
	}
	if m.Zone == "" {
		errs.add(p+".zone", "required")
	}
	if !capacityTypes[m.CapacityType] {
		errs.add(p+".capacityType", "%q is not one of on-demand, spot, reserved", m.CapacityType)
	}
	if len(m.Scope) > MaxScopeLength || !scopeRe.MatchString(m.Scope) {
		errs.add(p+".scope", "%q is not at most %d characters of [a-z0-9-]", m.Scope, MaxScopeLength)
	}
}

// scopeRe is what an OfferingKey.Scope may hold (empty for an unscoped mark).
var scopeRe = regexp.MustCompile(`^[a-z0-9-]*$`)

// Validate checks the batch and its snapshot: every pod named in Pods ("namespace/name") must
// be one of the snapshot's pending pods. Errors are FieldErrors under "podsPending".
func (pp *PodsPending) Validate() error {
	var errs fieldErrs
	if len(pp.Pods) == 0 {
		errs.add("podsPending.pods", "required: at least one pending pod")
	}
	if pp.Snapshot == nil {
		errs.add("podsPending.snapshot", "required")
		return errs.err()
	}
	pp.Snapshot.validate("podsPending.snapshot", &errs)
	pending := make(map[string]bool, len(pp.Snapshot.PendingPods))
	for i := range pp.Snapshot.PendingPods {
		pod := &pp.Snapshot.PendingPods[i]
		pending[pod.Namespace+"/"+pod.Name] = true
	}
	for i, name := range pp.Pods {
		q := fmt.Sprintf("podsPending.pods[%d]", i)
		ns, n, ok := strings.Cut(name, "/")
		switch {
		case !ok || ns == "" || n == "":
			errs.add(q, "%q is not of the form namespace/name", name)
		case !pending[name]:
			errs.add(q, "%q is not among snapshot.pendingPods", name)
		}
	}
	return errs.err()
}

// Validate checks the command has what its Kind needs, e.g. "command.nodeClaim: required for
// kind CreateNodeClaim", and that every Kubernetes value it carries is one the API server would
// accept (validateValues). Errors are FieldErrors under "command".
func (c *Command) Validate() error {
	var errs fieldErrs
	if c.ID == "" {
		errs.add("command.id", "required")
	}
	if c.Cluster == "" {
		errs.add("command.cluster", "required")
	} else if !ValidName(c.Cluster) {
		errs.add("command.cluster", "%q is not an RFC 1123 label", c.Cluster)
	}
	if c.SnapshotRevision < 0 {
		errs.add("command.snapshotRevision", "must be >= 0, got %d", c.SnapshotRevision)
	}
	needNodeName := func() {
		if c.NodeName == "" {
			errs.add("command.nodeName", "required for kind %s", c.Kind)
		}
	}
	switch c.Kind {
	case "":
		errs.add("command.kind", "required")
	case CommandCreateNodeClaim, CommandDeleteNodeClaim:
		if c.NodeClaim == nil {
			errs.add("command.nodeClaim", "required for kind %s", c.Kind)
			break
		}
		if c.NodeClaim.Name == "" {
			errs.add("command.nodeClaim.metadata.name", "required for kind %s", c.Kind)
		}
		// The launch happens before the command (DESIGN: fleet API, then commands), so the
		// created NodeClaim already knows its instance.
		if c.Kind == CommandCreateNodeClaim && c.NodeClaim.Status.ProviderID == "" {
			errs.add("command.nodeClaim.status.providerID", "required for kind %s", c.Kind)
		}
	case CommandTaintNode:
		needNodeName()
		if c.Taint == nil {
			errs.add("command.taint", "required for kind %s", c.Kind)
			break
		}
		if c.Taint.Key == "" {
			errs.add("command.taint.key", "required")
		}
		switch c.Taint.Effect {
		case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		default:
			errs.add("command.taint.effect", "%q is not one of NoSchedule, PreferNoSchedule, NoExecute", c.Taint.Effect)
		}
	case CommandDrainNode, CommandDeleteNode:
		needNodeName()
	case CommandUntaintNode:
		needNodeName()
		if c.Taint == nil || c.Taint.Key == "" {
			errs.add("command.taint.key", "required for kind %s", c.Kind)
		}
	case CommandRegisterNode:
		needNodeName()
		if c.NodeClaim == nil || c.NodeClaim.Name == "" {
			errs.add("command.nodeClaim.metadata.name", "required for kind %s", c.Kind)
		}
		if c.Finalizer == "" {
			errs.add("command.finalizer", "required for kind %s", c.Kind)
		}
	case CommandSetNodeClaimStatus:
		if c.NodeClaim == nil || c.NodeClaim.Name == "" {
			errs.add("command.nodeClaim.metadata.name", "required for kind %s", c.Kind)
			break
		}
		for i, cond := range c.NodeClaim.Status.Conditions {
			if cond.Type == "" {
				errs.add(fmt.Sprintf("command.nodeClaim.status.conditions[%d].type", i), "required")
			}
			switch cond.Status {
			case "True", "False", "Unknown":
			default:
				errs.add(fmt.Sprintf("command.nodeClaim.status.conditions[%d].status", i), "%q is not True, False or Unknown", cond.Status)
			}
		}
	case CommandLabelNode:
		needNodeName()
		if len(c.Labels) == 0 {
			errs.add("command.labels", "required for kind %s", c.Kind)
		}
	case CommandRemoveFinalizer:
		if c.Finalizer == "" {
			errs.add("command.finalizer", "required for kind %s", c.Kind)
		}
		if c.NodeName == "" && (c.NodeClaim == nil || c.NodeClaim.Name == "") && (c.NodeClass == nil || c.NodeClass.Name() == "") {
			errs.add("command.nodeName", "required for kind %s (or command.nodeClaim.metadata.name, or command.nodeClass)", c.Kind)
		}
	case CommandAddFinalizer:
		if c.Finalizer == "" {
			errs.add("command.finalizer", "required for kind %s", c.Kind)
		}
		if c.NodeClass == nil || c.NodeClass.Name() == "" {
			errs.add("command.nodeClass.metadata.name", "required for kind %s", c.Kind)
		}
	case CommandSetNodeClassStatus:
		if c.NodeClass == nil || c.NodeClass.Name() == "" {
			errs.add("command.nodeClass.metadata.name", "required for kind %s", c.Kind)
			break
		}
		validateConditions("command.nodeClass.status.conditions", c.NodeClass.Conditions(), &errs)
	case CommandSetNodePoolStatus:
		if c.NodePool == nil || c.NodePool.Name == "" {
			errs.add("command.nodePool.metadata.name", "required for kind %s", c.Kind)
			break
		}
		validateConditions("command.nodePool.status.conditions", c.NodePool.Status.Conditions, &errs)
	case CommandSetNodeOverlayStatus:
		if c.NodeOverlay == nil || c.NodeOverlay.Name == "" {
			errs.add("command.nodeOverlay.metadata.name", "required for kind %s", c.Kind)
			break
		}
		validateConditions("command.nodeOverlay.status.conditions", c.NodeOverlay.Status.Conditions, &errs)
		for i, cond := range c.NodeOverlay.Status.Conditions {
			if cond.Type != apisv1.ConditionValidationSucceeded && cond.Type != apisv1.ConditionReady {
				errs.add(fmt.Sprintf("command.nodeOverlay.status.conditions[%d].type", i), "%q: a NodeOverlay has only %s and %s",
					cond.Type, apisv1.ConditionValidationSucceeded, apisv1.ConditionReady)
			}
		}
	case CommandSetProvisioningRequestStatus:
		pr := c.ProvisioningRequest
		if pr == nil || pr.Name == "" || pr.Namespace == "" || pr.UID == "" {
			errs.add("command.provisioningRequest.metadata", "namespace, name and uid required for kind %s", c.Kind)
			break
		}
		validateConditions("command.provisioningRequest.status.conditions", pr.Status.Conditions, &errs)
		for i, cond := range pr.Status.Conditions {
			if !apisv1.IsProvisioningRequestCondition(cond.Type) {
				errs.add(fmt.Sprintf("command.provisioningRequest.status.conditions[%d].type", i),
					"%q: a ProvisioningRequest's conditions are Accepted, Provisioned, Failed, BookingExpired and CapacityRevoked", cond.Type)
			}
		}
	case CommandNominatePods, CommandDeletePods:
		switch {
		case c.Kind == CommandNominatePods && c.NodeClaim != nil && c.NodeName != "":
			errs.add("command.nodeClaim", "kind %s names a node (nodeName) or a NodeClaim whose node has not registered (nodeClaim), not both", c.Kind)
		case c.Kind == CommandNominatePods && c.NodeClaim != nil:
			if c.NodeClaim.Name == "" {
				errs.add("command.nodeClaim.metadata.name", "required for kind %s", c.Kind)
			}
		default:
			needNodeName()
		}
		if len(c.Pods) == 0 {
			errs.add("command.pods", "required for kind %s: at least one pod", c.Kind)
		}
		for i, p := range c.Pods {
			if p.Namespace == "" || p.Name == "" {
				errs.add(fmt.Sprintf("command.pods[%d]", i), "namespace and name are required")
			}
			if p.GracePeriodSeconds != nil && *p.GracePeriodSeconds < 0 {
				errs.add(fmt.Sprintf("command.pods[%d].gracePeriodSeconds", i), "must be >= 0, got %d", *p.GracePeriodSeconds)
			}
		}
	case CommandRecordEvents:
		if len(c.Events) == 0 {
			errs.add("command.events", "required for kind %s: at least one event", c.Kind)
		}
	case CommandMarkUnavailable:
		if len(c.Unavailable) == 0 {
			errs.add("command.unavailable", "required for kind %s: at least one offering", c.Kind)
		}
		for i := range c.Unavailable {
			c.Unavailable[i].validate(fmt.Sprintf("command.unavailable[%d]", i), &errs)
		}
	default:
		errs.add("command.kind", "%q is not a known command kind", c.Kind)
	}
	for i := range c.Events {
		c.Events[i].validate(fmt.Sprintf("command.events[%d]", i), &errs)
	}
	c.validateValues(&errs)
	if b := c.Budget; b != nil {
		if c.Kind != CommandTaintNode {
			errs.add("command.budget", "only a TaintNode reserves a disruption budget, not %s", c.Kind)
		}
		if b.NodePool == "" {
			errs.add("command.budget.nodePool", "required")
		}
		if b.MaxDisrupting < 0 {
			errs.add("command.budget.maxDisrupting", "must be >= 0, got %d", b.MaxDisrupting)
		}
	}
	return errs.err()
}

// validateValues checks every Kubernetes value a command carries by the API server's rules
// (shared/apis/validate), whatever its kind: names, labels, annotations, taints, the toleration,
// the finalizer and the NodeClaim a CreateNodeClaim creates. The agent applies these to the
// cluster and a NodeClaim's labels and taints reach a node's bootstrap, so a value the API
// server would refuse is refused here, with its path, before anything is applied.
func (c *Command) validateValues(errs *fieldErrs) {
	root := field.NewPath("command")
	if c.NodeName != "" {
		addAll(errs, validate.Name(c.NodeName, root.Child("nodeName")))
	}
	if nc := c.NodeClaim; nc != nil {
		metaValues("command.nodeClaim", &nc.ObjectMeta, errs)
		addAll(errs, validate.NodeClaimSpec(&nc.Spec, root.Child("nodeClaim", "spec")))
	}
	if t := c.Taint; t != nil {
		// Presence of the key and the effect is the kind's rule (above); here their syntax.
		tp := root.Child("taint")
		if t.Key != "" {
			addAll(errs, validate.QualifiedName(t.Key, tp.Child("key")))
		}
		addAll(errs, validate.LabelValue(t.Value, tp.Child("value")))
		if c.Kind != CommandTaintNode && t.Effect != "" && !slices.Contains(validate.TaintEffects, string(t.Effect)) {
			errs.add("command.taint.effect", "%q is not one of NoSchedule, PreferNoSchedule, NoExecute", t.Effect)
		}
	}
	addAll(errs, validate.Taints(c.Taints, root.Child("taints"), nil))
	addAll(errs, validate.Labels(c.Labels, root.Child("labels")))
	addAll(errs, validate.Annotations(c.Annotations, root.Child("annotations")))
	if c.Finalizer != "" {
		addAll(errs, validate.QualifiedName(c.Finalizer, root.Child("finalizer")))
	}
	if t := c.Toleration; t != nil {
		addAll(errs, validate.Toleration(*t, root.Child("toleration")))
	}
	for i, p := range c.Pods {
		pp := root.Child("pods").Index(i)
		if p.Namespace != "" {
			addAll(errs, validate.Namespace(p.Namespace, pp.Child("namespace")))
		}
		if p.Name != "" {
			addAll(errs, validate.Name(p.Name, pp.Child("name")))
		}
	}
	if np := c.NodePool; np != nil && np.Name != "" {
		addAll(errs, validate.Name(np.Name, root.Child("nodePool", "metadata", "name")))
	}
}

// EventKinds are the kinds of object an EventRecord may involve, with whether they are namespaced.
var EventKinds = map[string]bool{"Pod": true, "Node": false, "NodeClaim": false, "NodePool": false,
	apisv1.KindEC2NodeClass: false, apisv1.KindAKSNodeClass: false}

func (e *EventRecord) validate(p string, errs *fieldErrs) {
	namespaced, ok := EventKinds[e.Object.Kind]
	switch {
	case !ok:
		errs.add(p+".object.kind", "%q is not Pod, Node, NodeClaim, NodePool, EC2NodeClass or AKSNodeClass", e.Object.Kind)
	case e.Object.Name == "":
		errs.add(p+".object.name", "required")
	case namespaced && e.Object.Namespace == "":
		errs.add(p+".object.namespace", "required for kind %s", e.Object.Kind)
	case !namespaced && e.Object.Namespace != "":
		errs.add(p+".object.namespace", "must be empty: %s is cluster-scoped", e.Object.Kind)
	}
	if e.Type != corev1.EventTypeNormal && e.Type != corev1.EventTypeWarning {
		errs.add(p+".type", "%q is not Normal or Warning", e.Type)
	}
	if e.Reason == "" || len(e.Reason) > 128 {
		errs.add(p+".reason", "must be 1 to 128 characters")
	}
}

// CommandIDLength is the length of a CommandID in hex characters: 128 bits of SHA-256, far
// beyond any collision risk for the commands of one cluster.
const CommandIDLength = 32

// CommandID derives a deterministic id from the parts of a decision (cluster, snapshot revision,
// kind, target...), so a redelivered decision yields the same id and the queue and the agent
// drop the repeat. Each part is length-prefixed before hashing, so ("ab","c") and ("a","bc")
// differ. The result is the first CommandIDLength hex characters of the SHA-256.
func CommandID(parts ...string) string {
	h := sha256.New()
	var n [8]byte
	for _, p := range parts {
		binary.BigEndian.PutUint64(n[:], uint64(len(p)))
		h.Write(n[:])
		h.Write([]byte(p))
	}
	return hex.EncodeToString(h.Sum(nil))[:CommandIDLength]
}

// validateConditions checks each condition has a type (once) and a status of True, False or
// Unknown.
func validateConditions(field string, conds []metav1.Condition, errs *fieldErrs) {
	seen := map[string]bool{}
	for i, cond := range conds {
		p := fmt.Sprintf("%s[%d]", field, i)
		switch {
		case cond.Type == "":
			errs.add(p+".type", "required")
		case seen[cond.Type]:
			errs.add(p+".type", "%q given twice", cond.Type)
		}
		seen[cond.Type] = true
		switch cond.Status {
		case metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionUnknown:
		default:
			errs.add(p+".status", "%q is not True, False or Unknown", cond.Status)
		}
	}
}
