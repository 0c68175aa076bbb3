package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"runtime/pprof"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/commitments"
	"github.com/dovetail-dev/dovetail/shared/manifests"
	"github.com/dovetail-dev/dovetail/shared/planner"
	"github.com/dovetail-dev/dovetail/shared/preview"
	"github.com/dovetail-dev/dovetail/shared/provisioning"
	"github.com/dovetail-dev/dovetail/shared/provisioning/policyflags"
	"github.com/dovetail-dev/dovetail/shared/telemetry"
	"github.com/spf13/cobra"
)

func newPlanCommand() *cobra.Command {
	var files []string
	var output string
	var region string
	var live liveFlags
	var wide bool
	var policies policyflags.Flags
	var cpuProfile string
	cmd := &cobra.Command{
		Use:   "plan -f PATH [-f PATH ...] [--output json|table|wide] [--wide]",
		Short: "Print the provisioning decision for manifests, without launching anything",
		Long: `plan reads Kubernetes manifests (files or directories, multi-document YAML or JSON):
NodePool and EC2NodeClass (karpenter.sh/v1 and v1beta1), Deployment, StatefulSet, ReplicaSet,
Job, CronJob, Pod, DaemonSet, PodDisruptionBudget, Node for existing capacity, and
PersistentVolumeClaim, PersistentVolume and StorageClass for volume topology. Pods of a
controller are named <controller>-<index>; a StatefulSet's volumeClaimTemplates become claims
named <template>-<statefulset>-<index>. It prints the NodeClaims Dovetail would launch,
the pods placed on existing nodes, and the pods no node can take, with the reason.
Spot prices of the embedded catalog are estimates (see the catalog's spot-price model).

It also reads a live cluster's state: a dump piped in (kubectl get nodes,pods,pdb,daemonsets,
nodepools,ec2nodeclasses,nodeclaims,nodeoverlays,limitranges,pvc,pv,storageclasses,
provisioningrequests,podtemplates -A -o yaml | dovetail plan -f -), a directory of such dumps, or
the cluster itself through --kubeconfig (list calls, and a get of the dovetail-commitments
ConfigMap in --commitments-namespace). Running pods stay on their nodes; a controller adds only
the pods it does not run yet. Pods consuming a ProvisioningRequest are held back, as the provision
function holds them, and listed as held.
With nodes in the input it adds the saving against today: today's $/h at catalog prices, the
$/h Dovetail converges to (provision and consolidation repeated to a fixed point, within PDBs
and disruption budgets) and a lower bound. --disruption prints every decision of that
preview (consolidation, drift, expiry: what goes, what replaces it, why) and what blocks the
rest. Nothing is evicted or launched.
Exit status: 0 when a plan was made (even with unschedulable pods), 2 on invalid input.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(files) == 0 && live.kubeconfig == "" {
				return usageError{fmt.Errorf("-f: at least one manifest file or directory (or --kubeconfig) is required")}
			}
			switch {
			case output == "wide": // kubectl's spelling of the wide table
				output, wide = "table", true
			case output != "json" && output != "table":
				return usageError{fmt.Errorf("--output: %q is not json, table or wide", output)}
			case wide && output == "json":
				return usageError{fmt.Errorf("--wide: only with --output table (the JSON always lists each NodeClaim's pods)")}
			}
			pol, err := policies.Policies()
			if err != nil {
				return usageError{err}
			}
			if cpuProfile != "" {
				stop, err := startCPUProfile(cpuProfile)
				if err != nil {
					return usageError{fmt.Errorf("--cpuprofile: %w", err)}
				}
				defer stop()
			}
			if _, set := os.LookupEnv("GOMEMLIMIT"); !set {
				// A soft heap limit: near it the collector runs sooner instead of letting a large
				// dump's garbage (the read buffers, each round's solver input) double the heap.
				// GOMEMLIMIT overrides it (runtime/debug.SetMemoryLimit).
				debug.SetMemoryLimit(planMemoryLimit)
			}
			live.progress = startProgress(cmd.ErrOrStderr())
			defer live.progress.stop()
			live.progress.set("reading input")
			set, err := live.load(cmd, files)
			if err != nil {
				return err
			}
			if set.Objects() == 0 {
				return usageError{emptyInput(set, files, live.kubeconfig)}
			}
			cl, err := cloudOf(set)
			if err != nil {
				return usageError{err}
			}
			cat, err := cl.Catalog(regionOf(region, set))
			if err != nil {
				return usageError{fmt.Errorf("--region: %w", err)}
			}
			set.Warnings = append(set.Warnings, planner.Warnings(set)...)
			for _, w := range set.Warnings {
				fmt.Fprintln(cmd.ErrOrStderr(), "warning:", w)
			}
			if live.disruption {
				res, err := live.preview(set, cl, cat, pol)
				if err != nil {
					return err
				}
				d := &DisruptionOutput{Catalog: CatalogOutput{Region: cat.Region, Source: cat.Source}, Result: res}
				if output == "json" {
					return writeJSON(cmd.OutOrStdout(), d)
				}
				return writeDisruptionTable(cmd.OutOrStdout(), d)
			}
			live.progress.set("planning %d objects", set.Objects())
			at, err := live.time()
			if err != nil {
				return err
			}
			out, err := Plan(set, cat, cl.NodeSettings, pol, at)
			if err != nil {
				return usageError{err}
			}
			out.Warnings = set.Warnings
			if len(set.Nodes) > 0 {
				res, err := live.preview(set, cl, cat, pol)
				if err != nil {
					return err
				}
				out.Cluster = clusterOutput(res)
			}
			if output == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(out)
			}
			return writeTable(cmd.OutOrStdout(), out, wide)
		},
	}
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "manifest file or directory (repeatable; - reads standard input)")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: json, table, or wide (the table with --wide)")
	cmd.Flags().StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the run to this file (runtime/pprof; read it with go tool pprof), to see where a large input's time goes")
	cmd.Flags().BoolVar(&wide, "wide", false, "table: list each NodeClaim's pods (namespace/name) in a last column")
	live.register(cmd.Flags())
	policies.Register(cmd.Flags(), nil)
	cmd.Flags().StringVar(&region, "region", "", "region whose embedded catalog (zones, prices) the plan uses: for EC2NodeClasses "+strings.Join(catalog.EmbeddedRegions, ", ")+" (empty: the nodes' topology.kubernetes.io/region, else us-east-1); for AKSNodeClasses an Azure region such as eastus, westeurope or westcentralus (sizes without availability zones are planned in zone 0; empty: eastus)")
	return cmd
}

// planMemoryLimit is plan's soft heap limit (bytes) unless GOMEMLIMIT sets one: below the
// 2 GiB the issue asks a 100,000-object dump to stay under, with room for what is not heap.
const planMemoryLimit = 1536 << 20

// startCPUProfile starts runtime/pprof's CPU profile into path; stop ends it and closes the file.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// PlanOutput is the JSON shape `dovetail plan --output json` prints.
type PlanOutput struct {
	// Catalog says which catalog priced the plan.
	Catalog       CatalogOutput        `json:"catalog"`
	NodeClaims    []NodeClaimOutput    `json:"nodeClaims"`
	ExistingNodes []ExistingNodeOutput `json:"existingNodes"`
	Unschedulable []UnschedulableOut   `json:"unschedulable"`
	// Held are the pending pods consuming a ProvisioningRequest: served by their request, never
	// planned on their own (as the provision function and Cluster Autoscaler hold them).
	Held              []HeldOut `json:"held,omitempty"`
	TotalPricePerHour float64   `json:"totalPricePerHour"`
	// LowerBoundPerHour is what no plan can beat for the pods placed on new NodeClaims (USD per
	// hour; the fit-cut bound, see shared/provisioning/lowerbound); Gap is
	// totalPricePerHour / lowerBoundPerHour − 1: the plan costs at most that fraction more than
	// the cheapest possible plan. Both 0 when no new NodeClaim is needed.
	LowerBoundPerHour float64 `json:"lowerBoundPerHour"`
	Gap               float64 `json:"gap"`
	// Cluster is the saving against today's nodes, when the input holds nodes.
	Cluster *ClusterOutput `json:"cluster,omitempty"`
	// StaticBaseline is what a Cluster-Autoscaler-style static group of one on-demand type
	// (m5.2xlarge; Standard_D8s_v5 on Azure) would pay for the pods this plan put on new
	// NodeClaims (provisioning.StaticBaseline); unplaceable counts those it cannot hold.
	StaticBaseline *telemetry.StaticBaseline `json:"staticBaseline,omitempty"`
	// NodeOverlays are the input's NodeOverlays and what resolving them decided (applied, or
	// refused with Karpenter's reason: RuntimeValidation or Conflict), by name.
	NodeOverlays []NodeOverlayOutput `json:"nodeOverlays,omitempty"`
	// Commitments is each Savings Plan's and Reserved Instance's utilisation by the input's
	// nodes and this plan's NodeClaims together (the dovetail-commitments ConfigMap; absent
	// without one). NodeClaims' pricePerHour is then the effective price under them.
	Commitments []commitments.Use `json:"commitments,omitempty"`
	// Warnings are the lines printed on stderr about the input (documents skipped, pods on
	// missing nodes, ownerReference cycles, NodePools whose NodeClass is missing).
	Warnings []string `json:"warnings,omitempty"`
}

// NodeOverlayOutput is one NodeOverlay's outcome: Applied, or the reason and message its
// ValidationSucceeded condition would carry.
type NodeOverlayOutput struct {
	Name    string `json:"name"`
	Applied bool   `json:"applied"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// emptyInput is the error for input that held no object plan uses: an empty file, a dump of
// nothing, the wrong file. It names what was read and what was skipped.
func emptyInput(set *manifests.Set, files []string, kubeconfig string) error {
	from := strings.Join(files, ", ")
	if kubeconfig != "" {
		from = strings.TrimPrefix(from+", the cluster of "+kubeconfig, ", ")
	}
	msg := fmt.Sprintf("-f %s: no Kubernetes object plan uses was read", from)
	if n := len(set.Skipped); n > 0 {
		kinds := make([]string, 0, n)
		for k := range set.Skipped {
			kinds = append(kinds, k)
		}
		sort.Strings(kinds)
		msg += " (only kinds it does not use: " + strings.Join(kinds, ", ") + ")"
	}
	return errors.New(msg)
}

// CatalogOutput names the catalog a plan was priced with: its region and source ("embedded":
// offline data, on-demand list prices of the data's date and spot estimates).
type CatalogOutput struct {
	Region string `json:"region"`
	Source string `json:"source"`
}

// NodeClaimOutput is one NodeClaim: the offering the fleet call would get first, and the
// instance types it may fall back to. PriceSource says whether the price is a list price or
// an estimate (spot prices of the embedded catalog are modelled).
type NodeClaimOutput struct {
	NodePool            string   `json:"nodePool"`
	InstanceType        string   `json:"instanceType"`
	CapacityType        string   `json:"capacityType"`
	Zone                string   `json:"zone"`
	PricePerHour        float64  `json:"pricePerHour"`
	PriceSource         string   `json:"priceSource"`
	InstanceTypeOptions []string `json:"instanceTypeOptions"`
	Pods                []string `json:"pods"`
	// ReservationID and ReservationType name the capacity reservation of a reserved offering.
	ReservationID   string `json:"reservationID,omitempty"`
	ReservationType string `json:"reservationType,omitempty"`
	// PriceOverlay names the NodeOverlay that set PricePerHour; empty for the catalog's price.
	PriceOverlay string `json:"priceOverlay,omitempty"`
}

// ExistingNodeOutput lists pods placed on an existing node.
type ExistingNodeOutput struct {
	Name string   `json:"name"`
	Pods []string `json:"pods"`
}

// HeldOut is a pending pod the plan leaves out because it consumes a ProvisioningRequest
// (provreq.HoldBack, the provision function's rule): its request ("namespace/name") and why.
type HeldOut struct {
	Pod     string `json:"pod"`
	Request string `json:"request"`
	Reason  string `json:"reason"`
}

// UnschedulableOut is a pod no node can take.
type UnschedulableOut struct {
	Pod    string `json:"pod"`
	Reason string `json:"reason"`
}

// Plan solves the manifests (planner.Plan): controllers' pods and unbound Pods are pending;
// Pods with spec.nodeName are running on their Node; PersistentVolumeClaims (with those of
// StatefulSets' volumeClaimTemplates), PersistentVolumes and StorageClasses constrain where
// pods with volumes can go. settings is the cloud's NodeClass → node settings rule; pol the
// scheduling policies (--min-values-policy, --preference-policy).
func Plan(set *manifests.Set, cat *catalog.Catalog, settings provisioning.NodeSettingsFunc, pol provisioning.Policies, at time.Time) (*PlanOutput, error) {
	plan, in, held, err := planner.PlanAt(set, cat, settings, pol, at)
	if err != nil {
		return nil, err
	}
	out := &PlanOutput{Catalog: CatalogOutput{Region: cat.Region, Source: cat.Source}, NodeClaims: []NodeClaimOutput{}, ExistingNodes: []ExistingNodeOutput{}, Unschedulable: []UnschedulableOut{}}
	for i := range held {
		out.Held = append(out.Held, HeldOut{Pod: podName(held[i].Pod), Request: held[i].Request, Reason: held[i].Message()})
	}
	for _, nc := range plan.NodeClaims {
		first := nc.Cheapest()
		out.NodeClaims = append(out.NodeClaims, NodeClaimOutput{
			NodePool: nc.NodePool.Name, InstanceType: first.InstanceType.Name, CapacityType: first.CapacityType,
			Zone: first.Zone, PricePerHour: nc.PricePerHour(), PriceSource: string(first.PriceSource),
			InstanceTypeOptions: nc.InstanceTypeOptions(), Pods: podNames(nc.Pods),
			ReservationID: first.ReservationID, ReservationType: first.ReservationType, PriceOverlay: first.PriceOverlay,
		})
	}
	out.Commitments = plan.Commitments
	for _, o := range in.Overlays.Outcomes() {
		out.NodeOverlays = append(out.NodeOverlays, NodeOverlayOutput{Name: o.Name, Applied: o.Applied, Reason: o.Reason, Message: o.Message})
	}
	for _, e := range plan.ExistingNodes {
		out.ExistingNodes = append(out.ExistingNodes, ExistingNodeOutput{Name: e.Name, Pods: podNames(e.Pods)})
	}
	for _, u := range plan.Unschedulable {
		out.Unschedulable = append(out.Unschedulable, UnschedulableOut{Pod: podName(u.Pod), Reason: u.Reason})
	}
	out.TotalPricePerHour = preview.Round7(plan.TotalPricePerHour())
	out.LowerBoundPerHour = preview.Round7(plan.LowerBoundPerHour)
	out.Gap = float64(int64(plan.Gap()*1e4+0.5)) / 1e4
	if len(plan.NodeClaims) > 0 {
		var pods []*corev1.Pod
		for _, nc := range plan.NodeClaims {
			pods = append(pods, nc.Pods...)
		}
		b, err := provisioning.StaticBaseline(in, pods, cat)
		if err != nil {
			return nil, err
		}
		out.StaticBaseline = &telemetry.StaticBaseline{InstanceType: b.InstanceType, Nodes: b.Nodes, PricePerHour: preview.Round7(b.PricePerHour), Unplaceable: b.Unplaceable}
	}
	return out, nil
}

func podName(p *corev1.Pod) string {
	ns := p.Namespace
	if ns == "" {
		ns = "default"
	}
	return ns + "/" + p.Name
}

func podNames(ps []*corev1.Pod) []string {
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		out = append(out, podName(p))
	}
	sort.Strings(out)
	return out
}

// writeTable prints the plan as a table; wide adds a last column with each NodeClaim's pods.
func writeTable(w io.Writer, out *PlanOutput, wide bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	header := "NODEPOOL\tINSTANCE TYPE\tCAPACITY\tZONE\t$/H\tPODS\tFALLBACK TYPES"
	if wide {
		header += "\tPOD NAMES"
	}
	fmt.Fprintln(tw, header)
	for _, nc := range out.NodeClaims {
		price := fmt.Sprintf("%.4f", nc.PricePerHour)
		if nc.PriceSource == string(catalog.PriceSourceSpotModel) {
			price += " (est.)"
		}
		if nc.PriceOverlay != "" {
			price += " (overlay " + nc.PriceOverlay + ")"
		}
		if nc.PriceSource == string(catalog.PriceSourceCommitment) {
			price += " (commitment)"
		}
		capacity := nc.CapacityType
		if nc.ReservationID != "" {
			capacity += " (" + nc.ReservationID + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d", nc.NodePool, nc.InstanceType, capacity, nc.Zone, price,
			len(nc.Pods), len(nc.InstanceTypeOptions)-1)
		if wide {
			fmt.Fprintf(tw, "\t%s", strings.Join(nc.Pods, ","))
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nTotal: %d NodeClaims, %.4f USD/h (spot prices marked est. are estimates)\n", len(out.NodeClaims), out.TotalPricePerHour)
	if out.LowerBoundPerHour > 0 {
		fmt.Fprintf(w, "Lower bound: %.4f USD/h (no plan for these pods can cost less); gap %.1f %%\n", out.LowerBoundPerHour, 100*out.Gap)
	}
	if b := out.StaticBaseline; b != nil {
		fmt.Fprintf(w, "Static baseline: %d × %s on demand, %.4f USD/h for the same pods", b.Nodes, b.InstanceType, b.PricePerHour)
		if b.Unplaceable > 0 {
			fmt.Fprintf(w, " (%d pods it cannot hold)", b.Unplaceable)
		}
		fmt.Fprintln(w)
	}
	if err := commitments.WriteUtilisation(w, out.Commitments); err != nil {
		return err
	}
	fmt.Fprintf(w, "Catalog: %s %s catalog\n", out.Catalog.Source, out.Catalog.Region)
	for _, e := range out.ExistingNodes {
		fmt.Fprintf(w, "Existing node %s takes %d pods: %s\n", e.Name, len(e.Pods), strings.Join(e.Pods, ", "))
	}
	for _, u := range out.Unschedulable {
		fmt.Fprintf(w, "Unschedulable %s: %s\n", u.Pod, u.Reason)
	}
	for _, h := range out.Held {
		fmt.Fprintf(w, "Held %s: %s\n", h.Pod, h.Reason)
	}
	for _, o := range out.NodeOverlays {
		if !o.Applied {
			fmt.Fprintf(w, "NodeOverlay %s not applied (%s: %s)\n", o.Name, o.Reason, o.Message)
		}
	}
	if out.Cluster != nil {
		writeClusterTable(w, out.Cluster)
	}
	return nil
}
