// Command scheduled-events runs on each Dovetail AKS node (a DaemonSet with host networking,
// agent/scheduled-events.yaml): it polls the VM's IMDS Scheduled Events endpoint and publishes
// each new document to the cluster's notices subject on NATS JetStream, where the interruption
// function replaces a preempted spot VM before its NotBefore (agent/scheduledevents).
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/dovetail-dev/dovetail/agent/scheduledevents"
	"github.com/dovetail-dev/dovetail/events"
	qnats "github.com/dovetail-dev/dovetail/shared/queue/nats"
)

func main() {
	if err := newCommand().Execute(); err != nil {
		os.Exit(1)
	}
}

func newCommand() *cobra.Command {
	var cluster, natsURL, url string
	var interval time.Duration
	cmd := &cobra.Command{
		Use:          "scheduled-events",
		Short:        "Publishes this Azure VM's Scheduled Events (spot Preempt, Terminate, Reboot, Redeploy) to Dovetail's notices subject",
		SilenceUsage: true,
		Args:         cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !events.ValidName(cluster) {
				return fmt.Errorf("--cluster %q: must be an RFC 1123 label", cluster)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return run(ctx, cluster, natsURL, url, interval)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cluster, "cluster", "", "cluster name (RFC 1123 label) of the notices subject (required)")
	f.StringVar(&natsURL, "nats-url", "nats://127.0.0.1:4222", "NATS server URL")
	f.StringVar(&url, "imds-url", scheduledevents.DefaultURL, "the Scheduled Events endpoint")
	f.DurationVar(&interval, "interval", scheduledevents.DefaultInterval, "how often IMDS is polled (a Preempt gives 30 s of notice)")
	_ = cmd.MarkFlagRequired("cluster")
	return cmd
}

func run(ctx context.Context, cluster, natsURL, url string, interval time.Duration) error {
	nc, err := qnats.Connect(natsURL, "dovetail-scheduled-events-"+cluster)
	if err != nil {
		return err
	}
	defer nc.Close()
	pub, err := qnats.NewPublisher(nc)
	if err != nil {
		return err
	}
	p := &scheduledevents.Poller{URL: url, Publisher: pub, Cluster: cluster, Interval: interval, Log: slog.Default()}
	return p.Run(ctx)
}
