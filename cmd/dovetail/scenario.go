package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/dovetail-dev/dovetail/localdev"
	"github.com/dovetail-dev/dovetail/localdev/scenarios"
)

// addScenarioFlag adds --scenario to the dev command: "consolidation" scales a workload down and
// consolidates, "interruption" runs the spot-interruption scenario, "drift" the AMI roll-out,
// "static" a static NodePool's replicas and "runaway" the quarantine of a crash-looping Deployment (localdev/scenarios), printing what was decided and why; without the flag the command runs as
// before.
func addScenarioFlag(cmd *cobra.Command) {
	var name string
	cmd.Flags().StringVar(&name, "scenario", "", "run a disruption scenario instead: consolidation (scale down → fewer, cheaper nodes), interruption (spot notice → replacement before the reclaim; with --cloud azure a Scheduled Events Preempt through the Azure provider) drift (new AMI → nodes roll within budget) static (a NodePool with spec.replicas holds its count through a node deletion and a scale-down) or runaway (a crash-looping Deployment scaled to 200 gets only its quarantine allowance, a healthy one is provisioned)")
	run := cmd.RunE
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		out := cmd.OutOrStdout()
		switch name {
		case "":
			return run(cmd, args)
		case "interruption":
			interrupt := scenarios.Interruption
			if c, _ := cmd.Flags().GetString("cloud"); c == localdev.CloudAzure {
				interrupt = scenarios.AzurePreemption // a Scheduled Events Preempt through the Azure provider
			}
			res, err := interrupt(cmd.Context(), out)
			if err == nil && (res.Lost > 0 || res.Bound != res.Total) {
				err = fmt.Errorf("interruption scenario lost %d pods (%d/%d bound)", res.Lost, res.Bound, res.Total)
			}
			return err
		case "drift":
			res, err := scenarios.Drift(cmd.Context(), out)
			if err == nil && (res.Lost > 0 || res.MaxDisrupting > res.Budget) {
				err = fmt.Errorf("drift scenario lost %d pods, %d disrupting at once (budget %d)", res.Lost, res.MaxDisrupting, res.Budget)
			}
			return err
		case "static":
			res, err := scenarios.Static(cmd.Context(), out)
			if err == nil && (res.NodesAfterDeletion != res.Replicas || res.NodesAfterScaleDown != res.ScaledTo || res.Lost > 0) {
				err = fmt.Errorf("static scenario: %d nodes after the deletion (replicas %d), %d after scaling to %d, %d pods lost",
					res.NodesAfterDeletion, res.Replicas, res.NodesAfterScaleDown, res.ScaledTo, res.Lost)
			}
			return err
		case "consolidation":
			res, err := scenarios.Consolidation(cmd.Context(), out)
			// Scaling down leaves PodsAfter replicas; each must still run, at a lower $/h.
			if err == nil && (res.After > res.Before) {
				err = fmt.Errorf("consolidation raised $/h from %.4f to %.4f", res.Before, res.After)
			}
			return err
		case "runaway":
			res, err := scenarios.Runaway(cmd.Context(), out)
			// The healthy Deployment is provisioned; the crash-looping one gets its allowance.
			if err == nil && (res.WebBound != res.Replicas || res.CrashyGiven > res.Allowance) {
				err = fmt.Errorf("runaway scenario: web %d of %d bound, crashy given capacity for %d pods (allowance %d)",
					res.WebBound, res.Replicas, res.CrashyGiven, res.Allowance)
			}
			return err
		default:
			return fmt.Errorf("--scenario: %q is not consolidation, interruption, drift, static or runaway", name)
		}
	}
}
