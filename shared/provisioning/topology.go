package provisioning

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/dovetail-dev/dovetail/shared/scheduling"
)

// Topology: pod affinity, pod anti-affinity and topology spread on any topology key.
//
// A group counts the pods matching one label selector (in some namespaces) per domain of one
// topology key: per node for kubernetes.io/hostname, per label value otherwise (zone, capacity
// type, custom labels). Counts include pods running on existing nodes and pods this plan has
// placed so far. A NodeClaim's domain for a key is its requirement's single value; a claim whose
// requirement still allows several values is pinned to one as soon as a pod that a group counts
// (or that carries a constraint on the key) is placed on it, so every count stays exact.
//
// On kubernetes.io/hostname every target (node or NodeClaim) is its own domain, so all
// constraints there are count lookups: a pod's anti-affinity fails where its group counts a
// matching pod, and a running or placed pod's required anti-affinity (antiHosts) keeps every
// pod its selector matches off that target.

type constraintKind int

const (
	kindSpread constraintKind = iota
	kindAffinity
	kindAnti
)

// group counts matching pods per domain of one key.
type group struct {
	idx     int // position in topology.list
	key     string
	sel     labels.Selector
	allNS   bool
	ns      map[string]bool
	domains map[string]int // non-hostname keys: value → count
	hosts   map[any]int    // hostname: target (*bin or *claim) → count
	// hostTotal is the sum of hosts: whether any matching pod is placed on any node.
	hostTotal int
	// antiDomains/antiHosts count pods that carry a required anti-affinity term equal to this
	// group's (key, selector, namespaces): an incoming pod the selector matches must avoid them.
	antiDomains map[string]int
	antiHosts   map[any]int
	hasAnti     bool
}

func (g *group) matches(p *corev1.Pod) bool {
	if !g.allNS && !g.ns[namespaceOf(p)] {
		return false
	}
	return g.sel.Matches(labels.Set(p.Labels))
}

// constraint is one of a pod's topology rules, pointing at the group that counts for it.
type constraint struct {
	kind       constraintKind
	g          *group
	maxSkew    int32
	minDomains int32
	// honorAffinity/honorTaints are the spread's nodeAffinityPolicy (default Honor) and
	// nodeTaintsPolicy (default Ignore): which nodes' domains are eligible.
	honorAffinity, honorTaints bool
	preferred                  bool
	weight                     int32
}

// topology holds every group of one solve.
type topology struct {
	groups  map[string]*group
	list    []*group
	anyAnti bool // some group carries required anti-affinity on a non-hostname key
	// hostAnti are the hostname groups carrying required anti-affinity.
	hostAnti []*group
	// byRaw finds groups by their term's raw spelling (rawGroupKey).
	byRaw map[string]*group
	// byLabel indexes list (built by matching once every group exists): groups whose selector
	// requires key=value (or key in values) under each (key, value); others are in unindexed.
	byLabel   map[string]map[string][]int
	labelKeys []string // byLabel's keys, sorted
	unindexed []int
	indexed   int // len(list) when byLabel was built
}

// matching returns the groups that count the pod, in list order. Only the groups the pod's
// labels can satisfy are tested: most selectors require one label value, so a pod is tested
// against a handful of groups however many there are.
func (t *topology) matching(p *corev1.Pod) []*group {
	if t.indexed != len(t.list) || t.byLabel == nil {
		t.index()
	}
	var cand []int
	if len(t.labelKeys) <= 8 { // a few lookups cost less than iterating the pod's labels
		for _, k := range t.labelKeys {
			if v, ok := p.Labels[k]; ok {
				cand = append(cand, t.byLabel[k][v]...)
			}
		}
	} else {
		for k, v := range p.Labels {
			cand = append(cand, t.byLabel[k][v]...)
		}
	}
	cand = append(cand, t.unindexed...)
	slices.Sort(cand)
	var out []*group
	for i, gi := range cand {
		if i > 0 && cand[i-1] == gi {
			continue
		}
		if g := t.list[gi]; g.matches(p) {
			out = append(out, g)
		}
	}
	return out
}

// index builds byLabel and unindexed over list.
func (t *topology) index() {
	t.byLabel, t.labelKeys, t.unindexed, t.indexed = map[string]map[string][]int{}, nil, nil, len(t.list)
	defer func() { slices.Sort(t.labelKeys) }()
	for gi, g := range t.list {
		reqs, _ := g.sel.Requirements()
		keyed := false
		for _, r := range reqs {
			if op := r.Operator(); op != selection.Equals && op != selection.DoubleEquals && op != selection.In {
				continue
			}
			m := t.byLabel[r.Key()]
			if m == nil {
				m = map[string][]int{}
				t.byLabel[r.Key()] = m
				t.labelKeys = append(t.labelKeys, r.Key())
			}
			for _, v := range r.ValuesUnsorted() {
				m[v] = append(m[v], gi)
			}
			keyed = true
			break
		}
		if !keyed {
			t.unindexed = append(t.unindexed, gi)
		}
	}
}

func newTopology() *topology {
	return &topology{groups: map[string]*group{}}
}

// groupFor returns the group for (key, selector, namespaces), creating it.
func (t *topology) groupFor(key string, sel *metav1.LabelSelector, extra map[string]string, owner *corev1.Pod, namespaces []string, nsSelector *metav1.LabelSelector) (*group, error) {
	// Pods of one workload repeat the same term: find its group by the term's raw spelling
	// before parsing the selector (parsing is most of compiling a pod).
	raw := rawGroupKey(key, sel, extra, owner, namespaces, nsSelector)
	if g, ok := t.byRaw[raw]; ok {
		return g, nil
	}
	g, err := t.newGroup(key, sel, extra, owner, namespaces, nsSelector)
	if err == nil {
		if t.byRaw == nil {
			t.byRaw = map[string]*group{}
		}
		t.byRaw[raw] = g
	}
	return g, err
}

// rawGroupKey spells a term exactly: key, selector (labels sorted, expressions in order), extra
// labels, namespaces and whether a namespace selector is set.
func rawGroupKey(key string, sel *metav1.LabelSelector, extra map[string]string, owner *corev1.Pod, namespaces []string, nsSelector *metav1.LabelSelector) string {
	var b strings.Builder
	b.WriteString(key)
	b.WriteByte(0)
	if sel == nil {
		b.WriteString("<nil>")
	} else {
		writeSorted(&b, sel.MatchLabels)
		for _, e := range sel.MatchExpressions {
			b.WriteString(e.Key)
			b.WriteByte(1)
			b.WriteString(string(e.Operator))
			for _, v := range e.Values {
				b.WriteByte(1)
				b.WriteString(v)
			}
			b.WriteByte(2)
		}
	}
	b.WriteByte(0)
	writeSorted(&b, extra)
	b.WriteByte(0)
	switch {
	case nsSelector != nil:
		b.WriteByte('*')
	case len(namespaces) > 0:
		for _, n := range namespaces {
			b.WriteString(n)
			b.WriteByte(1)
		}
	default:
		b.WriteString("=")
		b.WriteString(namespaceOf(owner))
	}
	return b.String()
}

func writeSorted(b *strings.Builder, m map[string]string) {
	if len(m) == 1 { // most selectors: nothing to sort
		for k, v := range m {
			b.WriteString(k)
			b.WriteByte('=')
			b.WriteString(v)
			b.WriteByte(1)
		}
		return
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(m[k])
		b.WriteByte(1)
	}
}

func (t *topology) newGroup(key string, sel *metav1.LabelSelector, extra map[string]string, owner *corev1.Pod, namespaces []string, nsSelector *metav1.LabelSelector) (*group, error) {
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return nil, err
	}
	if len(extra) > 0 {
		keys := make([]string, 0, len(extra))
		for k := range extra {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			r, err := labels.NewRequirement(k, selection.In, []string{extra[k]})
			if err != nil {
				return nil, err
			}
			s = s.Add(*r)
		}
	}
	g := &group{key: key, sel: s}
	switch {
	case nsSelector != nil:
		// Namespace labels are not in the snapshot: a namespaceSelector counts every namespace,
		// the conservative reading for both affinity and spread.
		g.allNS = true
	case len(namespaces) > 0:
		g.ns = map[string]bool{}
		for _, n := range namespaces {
			g.ns[n] = true
		}
	default:
		g.ns = map[string]bool{namespaceOf(owner): true}
	}
	id := key + "|" + s.String() + "|" + nsKey(g)
	if cur, ok := t.groups[id]; ok {
		return cur, nil
	}
	g.domains, g.hosts = map[string]int{}, map[any]int{}
	g.antiDomains, g.antiHosts = map[string]int{}, map[any]int{}
	t.groups[id] = g
	g.idx = len(t.list)
	t.list = append(t.list, g)
	return g, nil
}

func nsKey(g *group) string {
	if g.allNS {
		return "*"
	}
	ns := make([]string, 0, len(g.ns))
	for n := range g.ns {
		ns = append(ns, n)
	}
	sort.Strings(ns)
	return strings.Join(ns, ",")
}

func namespaceOf(p *corev1.Pod) string {
	if p.Namespace == "" {
		return corev1.NamespaceDefault
	}
	return p.Namespace
}

// compileConstraints turns a pod's spread constraints and pod (anti-)affinity terms into
// constraints. Preferred terms and ScheduleAnyway spreads are returned as preferred
// constraints (relaxed later if needed); with ignorePrefs they are left out (PreferencesIgnore).
func (t *topology) compileConstraints(p *corev1.Pod, ignorePrefs bool) ([]constraint, error) {
	var out []constraint
	for i, tsc := range p.Spec.TopologySpreadConstraints {
		if ignorePrefs && tsc.WhenUnsatisfiable != corev1.DoNotSchedule {
			continue // Karpenter's newForTopologies skips every spread but DoNotSchedule under Ignore
		}
		extra := matchLabelValues(p, tsc.MatchLabelKeys)
		sel := tsc.LabelSelector
		if sel == nil {
			sel = &metav1.LabelSelector{MatchLabels: map[string]string{"dovetail.dev/no-match": "\x00"}}
		}
		g, err := t.groupFor(tsc.TopologyKey, sel, extra, p, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("spec.topologySpreadConstraints[%d]: %w", i, err)
		}
		c := constraint{kind: kindSpread, g: g, maxSkew: tsc.MaxSkew, honorAffinity: true,
			preferred: tsc.WhenUnsatisfiable == corev1.ScheduleAnyway}
		if tsc.MinDomains != nil {
			c.minDomains = *tsc.MinDomains
		}
		if tsc.NodeAffinityPolicy != nil && *tsc.NodeAffinityPolicy == corev1.NodeInclusionPolicyIgnore {
			c.honorAffinity = false
		}
		if tsc.NodeTaintsPolicy != nil && *tsc.NodeTaintsPolicy == corev1.NodeInclusionPolicyHonor {
			c.honorTaints = true
		}
		out = append(out, c)
	}
	aff := p.Spec.Affinity
	if aff == nil {
		return out, nil
	}
	// path and i name the term in an error (formatted only then: compiling every pod's terms is
	// on the solve's hot path).
	add := func(kind constraintKind, term *corev1.PodAffinityTerm, preferred bool, weight int32, path string, i int) error {
		if term.LabelSelector == nil {
			return nil // a nil selector matches no pod
		}
		extra := matchLabelValues(p, term.MatchLabelKeys)
		g, err := t.groupFor(term.TopologyKey, term.LabelSelector, extra, p, term.Namespaces, term.NamespaceSelector)
		if err != nil {
			return fmt.Errorf("%s[%d]: %w", path, i, err)
		}
		if kind == kindAnti && !preferred && !g.hasAnti {
			g.hasAnti = true
			if g.key != corev1.LabelHostname {
				t.anyAnti = true
			} else {
				t.hostAnti = append(t.hostAnti, g)
			}
		}
		out = append(out, constraint{kind: kind, g: g, preferred: preferred, weight: weight})
		return nil
	}
	if pa := aff.PodAffinity; pa != nil {
		for i := range pa.RequiredDuringSchedulingIgnoredDuringExecution {
			if err := add(kindAffinity, &pa.RequiredDuringSchedulingIgnoredDuringExecution[i], false, 0, "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution", i); err != nil {
				return nil, err
			}
		}
		for i := range pa.PreferredDuringSchedulingIgnoredDuringExecution {
			if ignorePrefs {
				break
			}
			w := &pa.PreferredDuringSchedulingIgnoredDuringExecution[i]
			if err := add(kindAffinity, &w.PodAffinityTerm, true, w.Weight, "spec.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution", i); err != nil {
				return nil, err
			}
		}
	}
	if pa := aff.PodAntiAffinity; pa != nil {
		for i := range pa.RequiredDuringSchedulingIgnoredDuringExecution {
			if err := add(kindAnti, &pa.RequiredDuringSchedulingIgnoredDuringExecution[i], false, 0, "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution", i); err != nil {
				return nil, err
			}
		}
		for i := range pa.PreferredDuringSchedulingIgnoredDuringExecution {
			if ignorePrefs {
				break
			}
			w := &pa.PreferredDuringSchedulingIgnoredDuringExecution[i]
			if err := add(kindAnti, &w.PodAffinityTerm, true, w.Weight, "spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution", i); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// matchLabelValues returns the pod's values of a term's matchLabelKeys (nil when it has none, the
// common case, which then costs no map).
func matchLabelValues(p *corev1.Pod, keys []string) map[string]string {
	var out map[string]string
	for _, k := range keys {
		if v, ok := p.Labels[k]; ok {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}

// record counts a pod placed on a target (a *bin or *claim) in every group that selects it, and
// its anti-affinity terms against the target's domain. domainOf gives the target's value for a
// key ("" when it has none).
func (t *topology) record(p *corev1.Pod, cons []constraint, target any, domainOf func(string) string) {
	t.recordGroups(t.matching(p), cons, target, domainOf)
}

// recordGroups is record for a pod whose matching groups are known.
func (t *topology) recordGroups(groups []*group, cons []constraint, target any, domainOf func(string) string) {
	for _, g := range groups {
		if g.key == corev1.LabelHostname {
			g.hosts[target]++
			g.hostTotal++
		} else if d := domainOf(g.key); d != "" {
			g.domains[d]++
		}
	}
	for _, c := range cons {
		if c.kind != kindAnti || c.preferred {
			continue
		}
		if c.g.key == corev1.LabelHostname {
			c.g.antiHosts[target]++
		} else if d := domainOf(c.g.key); d != "" {
			c.g.antiDomains[d]++
		}
	}
}

// unrecordGroups takes a pod recorded on a target out of the counts: recordGroups' inverse, for
// the same domains (domainOf must answer as it did then). Counts that reach zero are deleted, so
// an empty map still means "no matching pod anywhere".
func (t *topology) unrecordGroups(groups []*group, cons []constraint, target any, domainOf func(string) string) {
	dec := func(m map[string]int, k string) {
		if m[k]--; m[k] <= 0 {
			delete(m, k)
		}
	}
	decHost := func(m map[any]int, k any) {
		if m[k]--; m[k] <= 0 {
			delete(m, k)
		}
	}
	for _, g := range groups {
		if g.key == corev1.LabelHostname {
			decHost(g.hosts, target)
			g.hostTotal--
		} else if d := domainOf(g.key); d != "" {
			dec(g.domains, d)
		}
	}
	for _, c := range cons {
		if c.kind != kindAnti || c.preferred {
			continue
		}
		if c.g.key == corev1.LabelHostname {
			decHost(c.g.antiHosts, target)
		} else if d := domainOf(c.g.key); d != "" {
			dec(c.g.antiDomains, d)
		}
	}
}

// countedKeys returns the non-hostname keys under which the groups counting a pod count it (the
// keys a claim must be pinned on when the pod is placed on it), and those of its constraints.
func (t *topology) countedKeys(groups []*group, cons []constraint) []string {
	seen := map[string]bool{}
	var out []string
	for _, g := range groups {
		if g.key != corev1.LabelHostname && !seen[g.key] {
			seen[g.key] = true
			out = append(out, g.key)
		}
	}
	for _, c := range cons {
		if c.g.key != corev1.LabelHostname && !seen[c.g.key] {
			seen[c.g.key] = true
			out = append(out, c.g.key)
		}
	}
	sort.Strings(out)
	return out
}

// allowedDomains returns which values of the constraint's key a target may take for this pod:
// for spread, the eligible domains where one more matching pod keeps the skew within maxSkew
// (with the global minimum over eligible domains, 0 when fewer than minDomains are eligible);
// for affinity, the domains holding a matching pod (any, when none exists anywhere and the pod
// matches its own term — kube-scheduler's rule for the first pod of a group); for
// anti-affinity, every domain except those holding a matching pod. all=true means unrestricted.
func (c *constraint) allowedDomains(p *corev1.Pod, eligible []string) (vals map[string]bool, exclude map[string]bool, all bool) {
	g := c.g
	switch c.kind {
	case kindSpread:
		min := -1
		for _, d := range eligible {
			if n := g.domains[d]; min < 0 || n < min {
				min = n
			}
		}
		if min < 0 || int32(len(eligible)) < c.minDomains {
			min = 0
		}
		vals = map[string]bool{}
		for _, d := range eligible {
			if int32(g.domains[d]+1-min) <= c.maxSkew {
				vals[d] = true
			}
		}
		return vals, nil, false
	case kindAffinity:
		if len(g.domains) == 0 {
			if g.matches(p) {
				return nil, nil, true
			}
			return map[string]bool{}, nil, false
		}
		vals = map[string]bool{}
		for d, n := range g.domains {
			if n > 0 {
				vals[d] = true
			}
		}
		return vals, nil, false
	default:
		exclude = map[string]bool{}
		for d, n := range g.domains {
			if n > 0 {
				exclude[d] = true
			}
		}
		return nil, exclude, false
	}
}

// inverseAnti returns the domains of key where pods with a required anti-affinity term selecting
// the pod (whose matching groups are given) run (kube-scheduler checks existing pods' anti-affinity against the incoming pod).
func (t *topology) inverseAnti(groups []*group) map[string]map[string]bool {
	var out map[string]map[string]bool
	for _, g := range groups {
		if !g.hasAnti || g.key == corev1.LabelHostname || len(g.antiDomains) == 0 {
			continue
		}
		if out == nil {
			out = map[string]map[string]bool{}
		}
		if out[g.key] == nil {
			out[g.key] = map[string]bool{}
		}
		for d, n := range g.antiDomains {
			if n > 0 {
				out[g.key][d] = true
			}
		}
	}
	return out
}

// hostCheck checks hostname-keyed constraints for a target: spread, affinity, the pod's own
// anti-affinity, and the required anti-affinity of pods already there that selects it.
func hostCheck(p *corev1.Pod, cons []constraint, invHost []*group, target any) bool {
	for _, g := range invHost {
		if g.antiHosts[target] > 0 {
			return false
		}
	}
	for _, c := range cons {
		if c.g.key != corev1.LabelHostname {
			continue
		}
		switch c.kind {
		case kindSpread:
			// A new node is always an empty domain, so the minimum is 0: at most maxSkew
			// matching pods per node.
			if int32(c.g.hosts[target]+1) > c.maxSkew {
				return false
			}
		case kindAffinity:
			if c.g.hostTotal == 0 {
				if !c.g.matches(p) {
					return false
				}
				continue
			}
			if c.g.hosts[target] == 0 {
				return false
			}
		case kindAnti:
			if c.g.hosts[target] > 0 {
				return false
			}
		}
	}
	return true
}

// requirementFor turns allowed/excluded domains into a node requirement on key.
func requirementFor(key string, vals, exclude map[string]bool) *scheduling.Requirement {
	if vals != nil {
		list := make([]string, 0, len(vals))
		for v := range vals {
			list = append(list, v)
		}
		sort.Strings(list)
		return scheduling.MustRequirement(key, corev1.NodeSelectorOpIn, list...)
	}
	list := make([]string, 0, len(exclude))
	for v := range exclude {
		list = append(list, v)
	}
	sort.Strings(list)
	return scheduling.MustRequirement(key, corev1.NodeSelectorOpNotIn, list...)
}
