package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/cloud/registry"
	"github.com/dovetail-dev/dovetail/shared/kube"
	"github.com/dovetail-dev/dovetail/shared/manifests"
	"github.com/dovetail-dev/dovetail/shared/planner"
	"github.com/dovetail-dev/dovetail/shared/preview"
	"github.com/dovetail-dev/dovetail/shared/provisioning"
	"github.com/dovetail-dev/dovetail/shared/provreq"
)

// liveFlags are plan's flags for a live cluster's state: where to read it and the disruption
// preview.
type liveFlags struct {
	kubeconfig, context string
	// commitmentsNamespace is where --kubeconfig reads the dovetail-commitments ConfigMap: the
	// agent's namespace.
	commitmentsNamespace string
	disruption           bool
	at                   string
	// now is the clock --at defaults to (tests set it).
	now func() time.Time
	// progress reports the run's phase on stderr (plan sets it).
	progress *progress
}

func (l *liveFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&l.kubeconfig, "kubeconfig", "", "read the cluster's state through this kubeconfig (list calls, and get on the commitments ConfigMap; cmd/dovetail/plan-rbac.yaml grants them), besides any -f")
	fs.StringVar(&l.context, "context", "", "the kubeconfig context to use (default: its current context)")
	l.registerCommitments(fs)
	fs.BoolVar(&l.disruption, "disruption", false, "preview what the consolidate, drift and expiry decisions would do to the cluster's nodes, round after round, and the $/h before and after")
	fs.StringVar(&l.at, "at", "", "the time the preview decides at (RFC 3339, e.g. 2025-07-01T12:00:00Z; default now): expiry and consolidateAfter read it")
}

// DefaultCommitmentsNamespace is the namespace the install docs give the chart
// (docs/install.md: helm install ... -n dovetail-system), where the agent reads the commitments.
const DefaultCommitmentsNamespace = "dovetail-system"

func (l *liveFlags) registerCommitments(fs *pflag.FlagSet) {
	fs.StringVar(&l.commitmentsNamespace, "commitments-namespace", DefaultCommitmentsNamespace,
		"with --kubeconfig: the agent's namespace, where the dovetail-commitments ConfigMap (Savings Plans, Reserved Instances) is read from")
}

// time parses --at (default: now).
func (l *liveFlags) time() (time.Time, error) {
	if l.at == "" {
		if l.now != nil {
			return l.now(), nil
		}
		return time.Now(), nil
	}
	t, err := time.Parse(time.RFC3339, l.at)
	if err != nil {
		return time.Time{}, usageError{fmt.Errorf("--at: %q is not an RFC 3339 time (2025-07-01T12:00:00Z): %w", l.at, err)}
	}
	return t, nil
}

// load reads the cluster's state through --kubeconfig (when given) and the -f manifests into
// one Set. The state is listed as `kubectl get -o yaml` would print it and read as such a dump
// is, so a dump and the live cluster give the same plan.
func (l *liveFlags) load(cmd *cobra.Command, files []string) (*manifests.Set, error) {
	var streams []manifests.Stream
	if l.kubeconfig != "" {
		data, err := l.listCluster(cmd)
		if err != nil {
			return nil, err
		}
		streams = append(streams, manifests.Stream{Name: "cluster", R: bytes.NewReader(data)})
	}
	set, err := manifests.LoadAllWith(manifests.LoadOptions{Progress: func(n int) { l.progress.set("reading input: %d objects", n) }},
		cmd.InOrStdin(), streams, files...)
	if err != nil {
		return nil, usageError{err}
	}
	return set, nil
}

// listCluster lists the state resources through the kubeconfig (kube.ListState), gets the
// commitments ConfigMap of --commitments-namespace (kube.GetCommitments), and returns them as one
// JSON List document.
func (l *liveFlags) listCluster(cmd *cobra.Command) ([]byte, error) {
	// The API server's rule for a namespace name: a malformed one would otherwise read as
	// "no commitments" (NotFound) and plan at list prices without a word.
	if errs := validation.IsDNS1123Label(l.commitmentsNamespace); len(errs) > 0 {
		return nil, usageError{fmt.Errorf("--commitments-namespace %q: %s", l.commitmentsNamespace, strings.Join(errs, "; "))}
	}
	rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: l.kubeconfig}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: l.context}).ClientConfig()
	if err != nil {
		return nil, usageError{fmt.Errorf("--kubeconfig: %w", err)}
	}
	cfg.QPS, cfg.Burst = 20, 40
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, usageError{fmt.Errorf("--kubeconfig: %w", err)}
	}
	list, notServed, err := kube.ListState(cmd.Context(), dc, kube.DumpOptions{})
	if err != nil {
		return nil, err
	}
	if len(notServed) > 0 {
		fmt.Fprintf(cmd.ErrOrStderr(), "note: the cluster does not serve %s (none listed)\n", strings.Join(notServed, ", "))
	}
	cm, err := kube.GetCommitments(cmd.Context(), dc, l.commitmentsNamespace, kube.DumpOptions{})
	if err != nil {
		return nil, err
	}
	if cm != nil {
		list.Items = append(list.Items, *cm)
	}
	return json.Marshal(list.UnstructuredContent())
}

// cloud picks the cloud: from the NodeClasses' kind, else (a cluster without Karpenter's
// objects) from the nodes' provider IDs (azure:// is AKS, anything else EKS).
func cloudOf(set *manifests.Set) (registry.Cloud, error) {
	if len(set.NodeClasses) == 0 {
		for _, n := range set.Nodes {
			if strings.HasPrefix(n.Spec.ProviderID, "azure://") {
				return registry.Lookup(registry.Azure)
			}
		}
	}
	return registry.ForNodeClasses(set.NodeClasses)
}

// regionOf is --region, else the region most of the nodes carry (topology.kubernetes.io/region),
// else "" (the cloud's default).
func regionOf(flag string, set *manifests.Set) string {
	if flag != "" {
		return flag
	}
	count := map[string]int{}
	for _, n := range set.Nodes {
		if r := n.Labels[corev1.LabelTopologyRegion]; r != "" {
			count[r]++
		}
	}
	best := ""
	for r, c := range count {
		if c > count[best] || (c == count[best] && r < best) {
			best = r
		}
	}
	return best
}

// preview runs the preview over the Set's state at --at.
func (l *liveFlags) preview(set *manifests.Set, cl registry.Cloud, cat *catalog.Catalog, pol provisioning.Policies) (*preview.Result, error) {
	at, err := l.time()
	if err != nil {
		return nil, err
	}
	snap, err := planner.Snapshot(set, at)
	if err != nil {
		return nil, usageError{err}
	}
	// Consumers of ProvisioningRequests get capacity from their requests, never on their own.
	snap.PendingPods, _ = provreq.HoldBack(snap)
	l.progress.set("preview: %d nodes, %d pods", len(snap.Nodes), len(snap.Pods)+len(snap.PendingPods))
	res, err := preview.Run(snap, preview.Options{Catalog: cat, NodeSettings: cl.NodeSettings, Policies: pol, NodeClassRules: cl.NodeClassRules, NodeClassKind: cl.NodeClassKind,
		Owned: true, OnRound: func(n int) { l.progress.set("preview of %d nodes: round %d", len(snap.Nodes), n) }})
	if err != nil {
		return nil, usageError{err}
	}
	return res, nil
}

// ClusterOutput is the saving against today's nodes that `dovetail plan` adds when its input
// holds nodes (USD per hour; Estimated: some price is a modelled spot price).
type ClusterOutput struct {
	TodayPerHour       float64 `json:"todayPerHour"`
	TodayEstimated     bool    `json:"todayEstimated"`
	ConvergedPerHour   float64 `json:"convergedPerHour"`
	ConvergedEstimated bool    `json:"convergedEstimated"`
	SavingPerHour      float64 `json:"savingPerHour"`
	LowerBoundPerHour  float64 `json:"lowerBoundPerHour"`
	// AssumedNodePool names the NodePool a cluster without NodePools is previewed against.
	AssumedNodePool   string              `json:"assumedNodePool,omitempty"`
	AssumedNodePoolIs string              `json:"assumedNodePoolIs,omitempty"`
	Today             []preview.GroupCost `json:"today"`
	Converged         []preview.GroupCost `json:"converged"`
	Rounds            int                 `json:"rounds"`
	// PendingPods were pending at the start: converged includes their capacity.
	PendingPods int `json:"pendingPods"`
}

func clusterOutput(r *preview.Result) *ClusterOutput {
	return &ClusterOutput{TodayPerHour: r.Today.PricePerHour, TodayEstimated: r.Today.Estimated,
		ConvergedPerHour: r.Converged.PricePerHour, ConvergedEstimated: r.Converged.Estimated, SavingPerHour: r.SavingPerHour,
		LowerBoundPerHour: r.LowerBoundPerHour, AssumedNodePool: r.AssumedPool, AssumedNodePoolIs: r.AssumedWhat,
		Today: r.Today.Groups, Converged: r.Converged.Groups, Rounds: len(r.Rounds), PendingPods: r.PendingPods}
}

// DisruptionOutput is what `dovetail plan --disruption --output json` prints: the catalog and
// the preview (shared/preview.Result).
type DisruptionOutput struct {
	Catalog CatalogOutput `json:"catalog"`
	*preview.Result
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// price renders USD per hour, marking estimates.
func price(v float64, estimated bool) string {
	s := fmt.Sprintf("%.4f", v)
	if estimated {
		s += " (est.)"
	}
	return s
}

func isEstimate(source string) bool {
	return strings.HasPrefix(source, string(catalog.PriceSourceSpotModel))
}

// writeClusterTable prints the saving against today.
func writeClusterTable(w io.Writer, c *ClusterOutput) {
	fmt.Fprintf(w, "\nCluster today: %s USD/h; Dovetail converges to %s USD/h after %d round(s) (%s); lower bound %.4f USD/h\n",
		price(c.TodayPerHour, c.TodayEstimated), price(c.ConvergedPerHour, c.ConvergedEstimated), c.Rounds, saving(c.SavingPerHour, c.PendingPods), c.LowerBoundPerHour)
	if c.AssumedNodePool != "" {
		fmt.Fprintf(w, "No NodePool in the input: node groups drained onto the assumed NodePool %s, %s\n", c.AssumedNodePool, c.AssumedNodePoolIs)
	}
	for _, g := range c.Today {
		fmt.Fprintf(w, "  today %-24s %2d node(s) %s USD/h\n", owner(g.OwnerKind, g.Owner), g.Nodes, price(g.PricePerHour, g.Estimated))
	}
	for _, g := range c.Converged {
		fmt.Fprintf(w, "  after %-24s %2d node(s) %s USD/h\n", owner(g.OwnerKind, g.Owner), g.Nodes, price(g.PricePerHour, g.Estimated))
	}
}

// saving says what the convergence saves, or what it costs more and why.
func saving(v float64, pending int) string {
	if v >= 0 {
		return fmt.Sprintf("saves %.4f USD/h", v)
	}
	if pending > 0 {
		return fmt.Sprintf("costs %.4f USD/h more: %d pending pod(s) get capacity", -v, pending)
	}
	return fmt.Sprintf("costs %.4f USD/h more", -v)
}

func owner(kind, name string) string {
	if kind == "" {
		return "(no node group)"
	}
	return kind + " " + name
}

// writeDisruptionTable prints the preview for people: each round's decisions and blockers,
// then the nodes today and after, and the totals.
func writeDisruptionTable(w io.Writer, out *DisruptionOutput) error {
	r := out.Result
	fmt.Fprintf(w, "Disruption preview at %s (%s)\n", r.Time.UTC().Format(time.RFC3339), r.Stopped)
	if r.AssumedPool != "" {
		fmt.Fprintf(w, "No NodePool in the input: node groups drained onto the assumed NodePool %s, %s\n", r.AssumedPool, r.AssumedWhat)
	}
	for _, rd := range r.Rounds {
		fmt.Fprintf(w, "\nRound %d at %s\n", rd.N, rd.Time.UTC().Format(time.RFC3339))
		for _, d := range rd.Decisions {
			writeDecision(w, d)
		}
		if len(rd.Decisions) == 0 {
			fmt.Fprintln(w, "  no decision")
		}
		for _, b := range rd.Blocked {
			fmt.Fprintf(w, "  blocked %s (%s, %s): %s\n", b.Node, b.Function, b.Kind, b.Reason)
		}
	}
	fmt.Fprintln(w)
	if err := writeNodes(w, r); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nBefore: %s USD/h (%d nodes); after: %s USD/h (%d nodes); %s; lower bound %.4f USD/h (of which %.4f kept nodes)\n",
		price(r.Today.PricePerHour, r.Today.Estimated), len(r.Today.Nodes), price(r.Converged.PricePerHour, r.Converged.Estimated), len(r.Converged.Nodes),
		saving(r.SavingPerHour, r.PendingPods), r.LowerBoundPerHour, r.KeptPerHour)
	for _, n := range r.Nominated {
		fmt.Fprintf(w, "Nominated %s: waits for in-flight NodeClaim %s\n", n.Pod, n.To)
	}
	for _, u := range r.Unschedulable {
		fmt.Fprintf(w, "Unschedulable %s: %s\n", u.Pod, u.Reason)
	}
	fmt.Fprintf(w, "Catalog: %s %s catalog (spot prices marked est. are estimates)\n", out.Catalog.Source, out.Catalog.Region)
	return nil
}

func writeDecision(w io.Writer, d preview.Decision) {
	names := make([]string, len(d.Nodes))
	for i, n := range d.Nodes {
		names[i] = fmt.Sprintf("%s (%s %s %s)", n.Name, n.InstanceType, n.CapacityType, price(n.PricePerHour, isEstimate(n.PriceSource)))
	}
	head := strings.Join([]string{d.Function, d.Action, d.Reason}, " ")
	if len(names) > 0 {
		head += " " + strings.Join(names, ", ")
	}
	fmt.Fprintf(w, "  %s: %s\n", head, d.Why)
	if d.DriftedField != "" {
		fmt.Fprintf(w, "    drifted field: %s\n", d.DriftedField)
	}
	for _, l := range d.Launched {
		fmt.Fprintf(w, "    launch %s: %s %s %s %s, %d pod(s)\n", l.Name, l.InstanceType, l.CapacityType, l.Zone, price(l.PricePerHour, isEstimate(l.PriceSource)), len(l.Pods))
	}
	writeMoves(w, d.Moved)
	for _, x := range d.Waits {
		fmt.Fprintf(w, "    waits: %s\n", x)
	}
	fmt.Fprintf(w, "    %.4f -> %.4f USD/h\n", d.PricePerHourBefore, d.PricePerHourAfter)
}

func writeNodes(w io.Writer, r *preview.Result) error {
	after := map[string]bool{}
	for _, n := range r.Converged.Nodes {
		after[n.Name] = true
	}
	all := append(append([]preview.NodeCost(nil), r.Today.Nodes...), r.Converged.Nodes...)
	seen := map[string]bool{}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tOWNER\tINSTANCE TYPE\tCAPACITY\tZONE\t$/H\tTODAY\tAFTER")
	sort.SliceStable(all, func(i, j int) bool { return all[i].Name < all[j].Name })
	for _, n := range all {
		if seen[n.Name] {
			continue
		}
		seen[n.Name] = true
		p := "unpriced"
		if n.Priced {
			p = price(n.PricePerHour, isEstimate(n.PriceSource))
		}
		today, now := "-", "gone"
		if after[n.Name] {
			now = "kept"
		}
		for _, t := range r.Today.Nodes {
			if t.Name == n.Name {
				today = "yes"
			}
		}
		if today == "-" {
			now = "new"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", n.Name, owner(n.OwnerKind, n.Owner), n.InstanceType, n.CapacityType, n.Zone, p, today, now)
	}
	return tw.Flush()
}

// movesListed is how many moved pods the table names one by one; more are counted per node.
const movesListed = 8

func writeMoves(w io.Writer, moves []preview.PodMove) {
	if len(moves) <= movesListed {
		for _, m := range moves {
			fmt.Fprintf(w, "    %s -> %s\n", m.Pod, m.To)
		}
		return
	}
	count := map[string]int{}
	var order []string
	for _, m := range moves {
		if count[m.To] == 0 {
			order = append(order, m.To)
		}
		count[m.To]++
	}
	sort.Strings(order)
	for _, to := range order {
		fmt.Fprintf(w, "    %d pod(s) -> %s\n", count[to], to)
	}
}
