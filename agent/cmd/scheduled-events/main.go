// Command scheduled-events runs on each Dovetail AKS node (a DaemonSet with host networking,
// agent/scheduled-events.yaml): it polls the VM's IMDS Scheduled Events endpoint and publishes
// each new document, wrapped in a CloudEvent whose subject is the VM's resource ID, to the
// cluster's notices subject, where the interruption function replaces a preempted spot VM before
// its NotBefore (agent/scheduledevents). The transport is the agent's: NATS JetStream
// (--transport nats) or Azure Event Grid (--transport eventgrid: the notices custom topic of
// infra/azure, authenticated with the pod's workload identity).
package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/spf13/cobra"

	"github.com/dovetail-dev/dovetail/agent/scheduledevents"
	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/shared/queue"
	"github.com/dovetail-dev/dovetail/shared/queue/eventgrid"
	qnats "github.com/dovetail-dev/dovetail/shared/queue/nats"
	"github.com/dovetail-dev/dovetail/shared/queue/nats/natsauth"
)

func main() {
	if err := newCommand().Execute(); err != nil {
		os.Exit(1)
	}
}

func newCommand() *cobra.Command {
	var cluster, natsURL, url, transport, noticesTopic, node string
	var interval time.Duration
	var natsAuth natsauth.Client
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
			var pub queue.Publisher
			switch transport {
			case "nats":
				nc, err := qnats.Dial(natsURL, "dovetail-scheduled-events-"+cluster, cluster, natsauth.RoleScheduledEvents, natsAuth)
				if err != nil {
					return err
				}
				defer nc.Close()
				if pub, err = qnats.NewPublisher(nc); err != nil {
					return err
				}
			case "eventgrid":
				p, err := eventGridPublisher(cluster, noticesTopic)
				if err != nil {
					return err
				}
				pub = p
			default:
				return fmt.Errorf("--transport %q: must be nats or eventgrid", transport)
			}
			p := &scheduledevents.Poller{URL: url, Publisher: pub, Cluster: cluster, Interval: interval, Log: slog.Default(), Node: node}
			return p.Run(ctx)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cluster, "cluster", "", "cluster name (RFC 1123 label) of the notices subject (required)")
	f.StringVar(&transport, "transport", "nats", "queue transport: nats or eventgrid (the agent's)")
	f.StringVar(&natsURL, "nats-url", "nats://127.0.0.1:4222", "nats: NATS server URL")
	natsAuth.AddFlags(f)
	f.StringVar(&noticesTopic, "eventgrid-notices-topic-endpoint", "", "eventgrid: custom topic of notices (https://<topic>.<region>-1.eventgrid.azure.net/api/events; infra/azure output notices_topic_endpoint; required)")
	f.StringVar(&node, "node-name", os.Getenv("NODE_NAME"), "this node's name, for the logs (default $NODE_NAME); the CloudEvents' subject is the VM's resource ID, read from IMDS")
	f.StringVar(&url, "imds-url", scheduledevents.DefaultURL, "the Scheduled Events endpoint")
	f.DurationVar(&interval, "interval", scheduledevents.DefaultInterval, "how often IMDS is polled (a Preempt gives 30 s of notice)")
	_ = cmd.MarkFlagRequired("cluster")
	return cmd
}

// eventGridPublisher routes the notices subject to the notices topic, authenticated with
// azidentity's default chain (in AKS the workload identity the webhook injects); a shared key
// (eventgrid.EnvTopicKey) only for local endpoints.
func eventGridPublisher(cluster, endpoint string) (queue.Publisher, error) {
	if endpoint == "" {
		return nil, errors.New("--eventgrid-notices-topic-endpoint: required with --transport eventgrid")
	}
	var cred azcore.TokenCredential
	if os.Getenv(eventgrid.EnvTopicKey) == "" {
		c, err := azidentity.NewDefaultAzureCredential(nil)
		if err != nil {
			return nil, fmt.Errorf("azure credential: %w", err)
		}
		cred = c
	}
	return eventgrid.Config{Cluster: cluster, NoticesTopicEndpoint: endpoint, Credential: cred}.Publisher()
}
