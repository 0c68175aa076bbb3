package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/shared/catalog"
	"github.com/dovetail-dev/dovetail/shared/cloud/registry"
	"github.com/dovetail-dev/dovetail/shared/disruption"
	"github.com/dovetail-dev/dovetail/shared/manifests"
	"github.com/dovetail-dev/dovetail/shared/planner"
	"github.com/dovetail-dev/dovetail/shared/provisioning"
	"github.com/dovetail-dev/dovetail/shared/provisioning/policyflags"
)

// explainFlags are the flags `explain pod` and `explain node` share: where the cluster's state
// comes from (plan's -f and --kubeconfig), the time, the region and the output.
type explainFlags struct {
	files    []string
	output   string
	region   string
	live     liveFlags
	policies policyflags.Flags
}

func newExplainCommand() *cobra.Command {
	f := &explainFlags{}
	cmd := &cobra.Command{
		Use:   "explain (pod NAMESPACE/NAME | node NAME) [-f PATH ...] [--kubeconfig PATH] [-o text|json]",
		Short: "Say why a pod is pending or on its node, and why a node exists and is not consolidated or drifted",
		Long: `explain reads the cluster's state as plan does (a kubectl get -o yaml dump with -f, or the
cluster itself with --kubeconfig: cmd/dovetail/plan-rbac.yaml) and answers with
the reasons the functions' own decision code gives:

  explain pod NS/NAME   a pending pod: the ProvisioningRequest it consumes and waits for (its
                        class and conditions, or that it does not exist), the NodeClaim the
                        provision function would launch for it, or each NodePool tried and the
                        requirement, taint, limit, guardrail or capacity that refused it; a running pod: the decision that launched its
                        node and how the pod fits there.
  explain node NAME     why the node exists (the decision recorded on its NodeClaim), every
                        blocker that keeps consolidation and drift from it (each naming its
                        object), and what removing it would cost and where its pods would go
                        (the consolidate function's single-node simulation).

Nothing is evicted or launched. Exit status 0 when explained, 2 on invalid input or an object
the input does not hold.`,
	}
	cmd.PersistentFlags().StringArrayVarP(&f.files, "filename", "f", nil, "manifest or dump file or directory (repeatable; - reads standard input)")
	cmd.PersistentFlags().StringVarP(&f.output, "output", "o", "text", "output format: text or json")
	cmd.PersistentFlags().StringVar(&f.region, "region", "", "region whose embedded catalog prices the nodes (empty: the nodes' topology.kubernetes.io/region, else the cloud's default)")
	cmd.PersistentFlags().StringVar(&f.live.kubeconfig, "kubeconfig", "", "read the cluster's state through this kubeconfig (list calls, and get on the commitments ConfigMap; cmd/dovetail/plan-rbac.yaml grants them), besides any -f")
	cmd.PersistentFlags().StringVar(&f.live.context, "context", "", "the kubeconfig context to use (default: its current context)")
	f.live.registerCommitments(cmd.PersistentFlags())
	cmd.PersistentFlags().StringVar(&f.live.at, "at", "", "the time the decisions are made at (RFC 3339; default now): consolidateAfter, expiry and budgets' schedules read it")
	f.policies.Register(cmd.PersistentFlags(), nil)
	cmd.AddCommand(&cobra.Command{
		Use:   "pod NAMESPACE/NAME",
		Short: "Why the pod is pending, or why it runs on its node",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ns, name, ok := strings.Cut(args[0], "/")
			if !ok || ns == "" || name == "" {
				return usageError{fmt.Errorf("pod: %q is not NAMESPACE/NAME", args[0])}
			}
			w, err := f.world(cmd)
			if err != nil {
				return err
			}
			x, err := w.explainPod(ns, name)
			if err != nil {
				return err
			}
			return f.write(cmd.OutOrStdout(), x, func(out io.Writer) { writePodText(out, x) })
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use:   "node NAME",
		Short: "Why the node exists, what keeps it from consolidation and drift, and what removing it would do",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			w, err := f.world(cmd)
			if err != nil {
				return err
			}
			x, err := w.explainNode(args[0])
			if err != nil {
				return err
			}
			return f.write(cmd.OutOrStdout(), x, func(out io.Writer) { writeNodeText(out, x) })
		},
	})
	return cmd
}

func (f *explainFlags) write(w io.Writer, v any, text func(io.Writer)) error {
	switch f.output {
	case "json":
		return writeJSON(w, v)
	case "text":
		text(w)
		return nil
	}
	return usageError{fmt.Errorf("--output: %q is not text or json", f.output)}
}

// explainWorld is the cluster's state as the functions see it: the Set read, its snapshot at
// --at, the catalog and the cloud's rules.
type explainWorld struct {
	set   *manifests.Set
	snap  *events.Snapshot
	cat   *catalog.Catalog
	cloud registry.Cloud
	pol   provisioning.Policies
	st    *disruption.State
}

// world reads the input and builds the snapshot and the disruption state.
func (f *explainFlags) world(cmd *cobra.Command) (*explainWorld, error) {
	if f.output != "json" && f.output != "text" {
		return nil, usageError{fmt.Errorf("--output: %q is not text or json", f.output)}
	}
	if len(f.files) == 0 && f.live.kubeconfig == "" {
		return nil, usageError{fmt.Errorf("-f: a dump or manifest file or directory (or --kubeconfig) is required")}
	}
	pol, err := f.policies.Policies()
	if err != nil {
		return nil, usageError{err}
	}
	set, err := f.live.load(cmd, f.files)
	if err != nil {
		return nil, err
	}
	if set.Objects() == 0 {
		return nil, usageError{emptyInput(set, f.files, f.live.kubeconfig)}
	}
	cl, err := cloudOf(set)
	if err != nil {
		return nil, usageError{err}
	}
	cat, err := cl.Catalog(regionOf(f.region, set))
	if err != nil {
		return nil, usageError{fmt.Errorf("--region: %w", err)}
	}
	for _, w := range append(set.Warnings, planner.Warnings(set)...) {
		fmt.Fprintln(cmd.ErrOrStderr(), "warning:", w)
	}
	at, err := f.live.time()
	if err != nil {
		return nil, err
	}
	snap, err := planner.Snapshot(set, at)
	if err != nil {
		return nil, usageError{err}
	}
	st, err := disruption.NewState(snap, cat, cl.NodeSettings)
	if err != nil {
		return nil, usageError{err}
	}
	st.Policies = pol
	return &explainWorld{set: set, snap: snap, cat: cat, cloud: cl, pol: pol, st: st}, nil
}

// findPod is the input's pod namespace/name (controllers' pods named <controller>-<index>).
func (w *explainWorld) findPod(ns, name string) *corev1.Pod {
	for _, p := range w.set.ExpandPods() {
		pns := p.Namespace
		if pns == "" {
			pns = "default"
		}
		if pns == ns && p.Name == name {
			return p
		}
	}
	return nil
}
