package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dovetail-dev/dovetail/localdev"
	"github.com/dovetail-dev/dovetail/shared/provisioning/policyflags"
)

func newDevCommand() *cobra.Command {
	var o localdev.Options
	var verbose, nodeRepair bool
	var policies policyflags.Flags
	cmd := &cobra.Command{
		Use:   "dev [-f PATH ...] [--kubeconfig PATH | --control-plane real]",
		Short: "Run all of Dovetail on this machine: embedded NATS, fake cloud, in-memory cluster, agent and functions",
		Long: `dev starts an embedded NATS JetStream server, the fake cloud over the real AWS us-east-1
catalog, an in-memory cluster (or the cluster of --kubeconfig), the agent and the provision
function, applies a scenario (by default the seed NodePool and EC2NodeClass, an EKS-like system
node group and the workloads of the shared workload specs) and shows pods pending → nodes
launching → pods bound, then a summary with the cost against a static m5.2xlarge node group.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Out = cmd.OutOrStdout()
			pol, err := policies.Policies()
			if err != nil {
				return usageError{err}
			}
			o.Policies = pol
			o.DisableRepair = !nodeRepair
			if verbose {
				o.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
			}
			ctx := cmd.Context()
			keepServesHTTP(cmd.Flags(), &o)
			if o.Keep {
				var stop context.CancelFunc
				ctx, stop = signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
				defer stop()
			}
			_, err = localdev.Run(ctx, o)
			return err
		},
	}
	cmd.Flags().StringArrayVarP(&o.Manifests, "filename", "f", nil, "scenario manifest file or directory (default: the embedded seed scenario)")
	cmd.Flags().StringVar(&o.Kubeconfig, "kubeconfig", "", "use this cluster instead of the in-memory one")
	cmd.Flags().StringVar(&o.ControlPlane, "control-plane", localdev.ControlPlaneMemory,
		"memory (fake clientset and local stand-ins) or real (etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok on loopback; run 'make controlplane' first)")
	cmd.Flags().StringVar(&o.Cluster, "cluster", "dev", "cluster name (event sources, queue subjects, instance tags)")
	cmd.Flags().DurationVar(&o.BootDelay, "boot-delay", 3*time.Second, "how long a fake instance takes to join as a Ready node")
	cmd.Flags().DurationVar(&o.Timeout, "timeout", 0, "give up if not every pod is bound by then (default 2m; 5m with --control-plane real, which starts a control plane first)")
	policies.Register(cmd.Flags(), nil)
	cmd.Flags().BoolVar(&nodeRepair, "node-repair", true,
		"the lifecycle function replaces Nodes unhealthy past the cloud's repair policies (Karpenter's node repair, with its 20% breaker), as the lifecycle binary's --node-repair")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "log every component to stderr")
	cmd.Flags().BoolVar(&o.Keep, "keep", false, "keep everything running after the summary until interrupted (kubectl against --control-plane real; the agent's and functions' /metrics, /healthz and /readyz on loopback)")
	cmd.Flags().StringVar(&o.AgentHTTPAddr, "agent-http-addr", "",
		"serve the agent's /metrics, /healthz and /readyz here, as its --http-addr (default with --keep: 127.0.0.1 on a free port; otherwise off)")
	cmd.Flags().StringVar(&o.FunctionsHTTPAddr, "functions-http-addr", "",
		"serve the functions' /metrics, /healthz and /readyz here, as a NATS worker's --http-addr (default with --keep: 127.0.0.1 on a free port; otherwise off)")

	cmd.Flags().StringVar(&o.CloudProvider, "cloud", localdev.CloudFake,
		"cloud provider of the functions: fake (the fake cloud's Go interface), aws (aws-sdk-go-v2 against an EC2/SSM endpoint) or azure (azure-sdk-for-go against the fake cloud's Azure face, the embedded Azure catalog and the AKS seed scenario)")
	cmd.Flags().StringVar(&o.Region, "region", "",
		"region of the embedded catalog the fake cloud sells from (default: us-east-1, or eastus with --cloud azure; an Azure region without availability zones such as westcentralus launches VMs without zones, in zone 0)")
	cmd.Flags().StringVar(&o.AKSProvisionMode, "aks-provision-mode", "aksscriptless",
		"with --cloud azure, how nodes get the AKS bootstrap: aksscriptless (rendered locally into the VM's custom data) or bootstrappingclient (asked of the fake AKS NodeBootstrapping API; the provisioning command runs as the VM's CustomScript extension cse-agent-karpenter)")
	cmd.Flags().StringVar(&o.AWSEndpoint, "aws-endpoint", "",
		"EC2/SSM endpoint URL for --cloud aws (default: the fake cloud's own, started on 127.0.0.1)")
	addScenarioFlag(cmd)
	return cmd
}

// keepServesHTTP: with --keep, what keeps running can be watched as it would be deployed — the
// agent's and the functions' /metrics, /healthz and /readyz on loopback (a free port unless
// --agent-http-addr / --functions-http-addr pin one; localdev prints the URLs). Without --keep
// the run ends with its summary and serves nothing unless asked.
func keepServesHTTP(flags *pflag.FlagSet, o *localdev.Options) {
	if !o.Keep {
		return
	}
	if !flags.Changed("agent-http-addr") {
		o.AgentHTTPAddr = "127.0.0.1:0"
	}
	if !flags.Changed("functions-http-addr") {
		o.FunctionsHTTPAddr = "127.0.0.1:0"
	}
}
