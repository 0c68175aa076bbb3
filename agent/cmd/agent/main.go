// Command agent runs Dovetail's in-cluster agent against a cluster (in-cluster config, or
// --kubeconfig) and a queue: NATS JetStream (--transport nats, the default), Amazon SQS
// (--transport sqs: events to one FIFO queue per function, commands long-polled from another, claim
// checks in S3) or Azure Event Grid (--transport eventgrid: events to a custom topic that pushes
// them to each function, commands pulled from a namespace topic's queue subscription, claim checks
// and dead letters in Blob Storage).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/spf13/cobra"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/dovetail-dev/dovetail/agent"
	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/shared/queue"
	"github.com/dovetail-dev/dovetail/shared/queue/azureblob"
	"github.com/dovetail-dev/dovetail/shared/queue/eventgrid"
	qnats "github.com/dovetail-dev/dovetail/shared/queue/nats"
	"github.com/dovetail-dev/dovetail/shared/queue/nats/natsauth"
	"github.com/dovetail-dev/dovetail/shared/queue/s3blob"
	"github.com/dovetail-dev/dovetail/shared/queue/sqs"
	"github.com/dovetail-dev/dovetail/shared/telemetry/prom"
)

// serviceAccountNamespace is where Kubernetes mounts the pod's namespace for in-cluster clients.
const serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

type options struct {
	kubeconfig, cluster, namespace, natsURL, blobDir              string
	batchIdle, batchMax, snapshotInterval, changeSnapshotInterval time.Duration
	evictionTimeout, syncTimeout                                  time.Duration
	kubeQPS                                                       float32
	kubeBurst                                                     int
	commandWorkers                                                int
	ensureStream                                                  bool
	natsAuth                                                      natsauth.Client
	nodeClassKind                                                 string
	// --transport sqs
	transport, commandQueueURL, commandDLQURL string
	eventQueueURLs                            []string
	blobBucket, blobPrefix                    string
	s3PathStyle                               bool
	// --transport eventgrid
	egTopicEndpoint, egNamespace, commandsTopic, commandsSubscription string
	storageAccountURL, blobContainer, deadLetterContainer             string
	azureClientOptions                                                azcore.ClientOptions // tests
	httpAddr                                                          string
	leaderElect                                                       bool
	leaseDuration, renewDeadline, retryPeriod                         time.Duration
}

func main() {
	if err := newCommand().Execute(); err != nil {
		os.Exit(1)
	}
}

func newCommand() *cobra.Command {
	o := options{}
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Dovetail's in-cluster agent: watches the cluster, publishes events, applies commands",
		Long: "The agent watches Pods, Nodes, DaemonSets, PDBs, NodePools, NodeClaims and the NodeClasses\n" +
			"of its cloud (EC2NodeClasses or AKSNodeClasses),\n" +
			"publishes batched pending-pod events and periodic snapshots to NATS JetStream, and applies\n" +
			"the commands Dovetail's functions send back. It decides nothing.",
		SilenceUsage: true,
		Args:         cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return run(ctx, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "path to a kubeconfig; empty: in-cluster config")
	f.StringVar(&o.cluster, "cluster", "", "cluster name (RFC 1123 label) used in queue subjects and event sources (required)")
	f.StringVar(&o.namespace, "namespace", "", "the agent's namespace (its ConfigMap); default: the service account's namespace")
	f.StringVar(&o.nodeClassKind, "node-class-kind", "EC2NodeClass", "the NodeClass kind the cluster's NodePools reference and the agent watches: EC2NodeClass (EKS) or AKSNodeClass (AKS)")
	f.StringVar(&o.transport, "transport", "nats", "queue transport: nats, sqs or eventgrid")
	f.StringVar(&o.natsURL, "nats-url", "nats://127.0.0.1:4222", "NATS server URL")
	o.natsAuth.AddFlags(f)
	f.StringSliceVar(&o.eventQueueURLs, "event-queue-url", nil, "sqs: FIFO queue URL events are published to, repeated (or comma-separated) for one queue per function: an SQS message reaches one consumer (required with --transport sqs)")
	f.StringVar(&o.commandQueueURL, "command-queue-url", "", "sqs: FIFO queue URL commands are long-polled from (required with --transport sqs)")
	f.StringVar(&o.commandDLQURL, "command-dlq-url", "", "sqs: dead-letter queue URL for poison commands; empty: left to the redrive policy")
	f.StringVar(&o.blobBucket, "blob-bucket", "", "sqs: S3 bucket for claim-checked payloads; empty: --blob-dir or refuse them")
	f.StringVar(&o.blobPrefix, "blob-prefix", s3blob.DefaultPrefix, "sqs: key prefix of claim-checked payloads (the bucket's lifecycle rule expires it)")
	f.BoolVar(&o.s3PathStyle, "s3-path-style", false, "sqs: path-style S3 addressing (local endpoints)")
	f.StringVar(&o.egTopicEndpoint, "eventgrid-topic-endpoint", "", "eventgrid: custom topic events are published to (https://<topic>.<region>-1.eventgrid.azure.net/api/events; required)")
	f.StringVar(&o.egNamespace, "eventgrid-namespace-endpoint", "", "eventgrid: namespace of the commands topic (https://<namespace>.<region>-1.eventgrid.azure.net; required)")
	f.StringVar(&o.commandsTopic, "commands-topic", eventgrid.DefaultCommandsTopic, "eventgrid: namespace topic of commands")
	f.StringVar(&o.commandsSubscription, "commands-subscription", eventgrid.DefaultCommandsSubscription, "eventgrid: the agent's queue subscription of the commands topic")
	f.StringVar(&o.storageAccountURL, "storage-account-url", "", "eventgrid: Blob endpoint of the storage account (https://<account>.blob.core.windows.net); "+azureblob.EnvConnectionString+" overrides it for local endpoints")
	f.StringVar(&o.blobContainer, "blob-container", "", "eventgrid: container of claim-checked payloads; empty: --blob-dir or refuse them")
	f.StringVar(&o.deadLetterContainer, "dead-letter-container", "", "eventgrid: container poison commands are written to with their reason; empty: rejected to Event Grid's dead-letter destination")
	f.BoolVar(&o.ensureStream, "ensure-stream", true, "create or update the cluster's JetStream stream at start")
	f.StringVar(&o.blobDir, "blob-dir", "", "directory for claim-checked payloads too large for an event; empty: refuse them")
	f.DurationVar(&o.batchIdle, "batch-idle", agent.DefaultBatchIdle, "close a pending-pod batch after this long without a new pending pod")
	f.DurationVar(&o.batchMax, "batch-max", agent.DefaultBatchMax, "close a pending-pod batch after this long at most")
	f.DurationVar(&o.snapshotInterval, "snapshot-interval", agent.DefaultSnapshotInterval, "period of snapshot events; negative disables")
	f.DurationVar(&o.changeSnapshotInterval, "change-snapshot-interval", agent.DefaultChangeSnapshotInterval, "a snapshot event follows Node or NodeClaim changes and pod deletions within this; negative disables")
	f.DurationVar(&o.evictionTimeout, "eviction-timeout", 10*time.Second, "deadline of each Eviction API call during a drain")
	f.DurationVar(&o.syncTimeout, "sync-timeout", 2*time.Minute, "deadline for the initial informer sync")
	f.IntVar(&o.commandWorkers, "command-workers", agent.DefaultCommandWorkers, "nats: commands applied at once, one per object (events.Command.OrderingKey); commands on one object are applied in order; 1: one command at a time")
	f.Float32Var(&o.kubeQPS, "kube-api-qps", agent.DefaultKubeQPS, "client-side limit of API server requests per second")
	f.IntVar(&o.kubeBurst, "kube-api-burst", agent.DefaultKubeBurst, "client-side burst of API server requests")
	f.StringVar(&o.httpAddr, "http-addr", ":8080", "address of the HTTP server for /metrics (Prometheus), /healthz and /readyz; empty: none")
	f.BoolVar(&o.leaderElect, "leader-elect", true, "elect one leader among the agent's replicas with the coordination.k8s.io Lease dovetail-agent in --namespace; only the leader publishes and applies, the others stand by")
	f.DurationVar(&o.leaseDuration, "leader-election-lease-duration", agent.DefaultLeaseDuration, "how long a standby waits after the leader's last renewal before taking the Lease")
	f.DurationVar(&o.renewDeadline, "leader-election-renew-deadline", agent.DefaultRenewDeadline, "how long the leader keeps trying to renew before it gives up leading (and exits)")
	f.DurationVar(&o.retryPeriod, "leader-election-retry-period", agent.DefaultRetryPeriod, "how often the Lease is tried and renewed")
	_ = cmd.MarkFlagRequired("cluster")
	return cmd
}

func run(ctx context.Context, o options) error {
	if !events.ValidName(o.cluster) {
		return fmt.Errorf("--cluster %q: must be an RFC 1123 label", o.cluster)
	}
	if o.commandWorkers < 1 {
		return fmt.Errorf("--command-workers %d: must be at least 1", o.commandWorkers)
	}
	if o.namespace == "" {
		b, err := os.ReadFile(serviceAccountNamespace)
		if err != nil {
			return errors.New("--namespace: required outside a pod (no service account namespace mounted)")
		}
		o.namespace = strings.TrimSpace(string(b))
	}
	restCfg, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return fmt.Errorf("kubernetes client config: %w", err)
	}
	restCfg.UserAgent = "dovetail-agent"
	restCfg.QPS, restCfg.Burst = o.kubeQPS, o.kubeBurst
	kc, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return err
	}
	dc, err := dynamic.NewForConfig(restCfg)
	if err != nil {
		return err
	}
	var (
		pub   queue.Publisher
		cons  queue.Consumer
		blobs events.BlobStore
	)
	// The API server is probed at /version, which every client may read (the default
	// system:public-info-viewer ClusterRole), so the probe needs no RBAC beyond agent/rbac.yaml.
	deps := []agent.Dependency{{Name: "kubernetes API server", Check: func(ctx context.Context) error {
		return kc.Discovery().RESTClient().Get().AbsPath("/version").Do(ctx).Error()
	}}}
	if o.blobDir != "" {
		blobs = events.FileBlobStore{Dir: o.blobDir}
	}
	switch o.transport {
	case "nats":
		nc, err := qnats.Dial(o.natsURL, "dovetail-agent-"+o.cluster, o.cluster, natsauth.RoleAgent, o.natsAuth)
		if err != nil {
			return err
		}
		defer nc.Close()
		deps = append(deps, agent.Dependency{Name: "NATS", Check: func(context.Context) error { return qnats.ConnectionState(nc) }})
		if o.ensureStream {
			if _, err := qnats.EnsureStream(ctx, nc, qnats.StreamConfig{Cluster: o.cluster}); err != nil {
				return err
			}
		}
		np, err := qnats.NewPublisher(nc)
		if err != nil {
			return err
		}
		pub = np
		if cons, err = qnats.NewConsumer(ctx, nc, qnats.ConsumerConfig{
			Cluster: o.cluster, Durable: natsauth.AgentDurable, Subject: queue.CommandsSubject(o.cluster),
			Workers: o.commandWorkers, Key: agent.CommandKey,
		}); err != nil {
			return err
		}
	case "sqs":
		var err error
		var probe agent.Dependency
		if pub, cons, blobs, probe, err = sqsTransport(ctx, o, blobs); err != nil {
			return err
		}
		deps = append(deps, probe)
	case "eventgrid":
		var err error
		if pub, cons, blobs, err = eventGridTransport(o, blobs); err != nil {
			return err
		}
	default:
		return fmt.Errorf("--transport %q: must be nats, sqs or eventgrid", o.transport)
	}
	rec := prom.NewRecorder()
	a, err := agent.New(agent.Config{
		Cluster: o.cluster, Namespace: o.namespace, Kube: kc, Dynamic: dc,
		Publisher: pub, Commands: cons, Blobs: blobs,
		BatchIdle: o.batchIdle, BatchMax: o.batchMax, SnapshotInterval: o.snapshotInterval, ChangeSnapshotInterval: o.changeSnapshotInterval,
		EvictionTimeout: o.evictionTimeout, SyncTimeout: o.syncTimeout, NodeClassKind: o.nodeClassKind, Metrics: rec,
		Dependencies: deps, LeaderElection: leaderElection(o),
	})
	if err != nil {
		return err
	}
	// Liveness is the process answering; readiness waits for the informer caches and fails
	// while the API server or the queue does not answer.
	srv := &prom.Server{Addr: o.httpAddr, Recorder: rec, Ready: a.Ready}
	if _, err := srv.Start(ctx); err != nil {
		return err
	}
	return a.Run(ctx)
}

// leaderElection is the agent's LeaderElection for --leader-elect (nil without it); the
// replica's identity is its hostname, the pod's name.
func leaderElection(o options) *agent.LeaderElection {
	if !o.leaderElect {
		return nil
	}
	return &agent.LeaderElection{LeaseDuration: o.leaseDuration, RenewDeadline: o.renewDeadline, RetryPeriod: o.retryPeriod}
}

// sqsTransport builds the SQS publisher (events), the long-polling command consumer, with
// --blob-bucket the S3 claim-check store, and the probe of the command queue (GetQueueAttributes,
// which the agent's role holds on it: infra/aws). Credentials, region and endpoint come from the
// SDK's default chain (EKS Pod Identity or IRSA in the cluster; AWS_ENDPOINT_URL for local
// endpoints).
func sqsTransport(ctx context.Context, o options, blobs events.BlobStore) (queue.Publisher, queue.Consumer, events.BlobStore, agent.Dependency, error) {
	var probe agent.Dependency
	if len(o.eventQueueURLs) == 0 || o.commandQueueURL == "" {
		return nil, nil, nil, probe, errors.New("--event-queue-url and --command-queue-url: required with --transport sqs")
	}
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, nil, nil, probe, fmt.Errorf("aws config: %w", err)
	}
	client := awssqs.NewFromConfig(cfg)
	// Every event goes to each function's queue (provision, consolidate, drift, interruption).
	subject := queue.EventsSubject(o.cluster)
	pub := &sqs.Publisher{Client: client, Routes: map[string]string{subject: o.eventQueueURLs[0]},
		FanOut: map[string][]string{subject: o.eventQueueURLs[1:]}}
	cons, err := sqs.NewConsumer(sqs.ConsumerConfig{Client: client, QueueURL: o.commandQueueURL, DeadLetterURL: o.commandDLQURL})
	if err != nil {
		return nil, nil, nil, probe, err
	}
	if o.blobBucket != "" {
		s3c := s3.NewFromConfig(cfg, func(so *s3.Options) { so.UsePathStyle = o.s3PathStyle })
		blobs = &s3blob.Store{Client: s3c, Bucket: o.blobBucket, Prefix: o.blobPrefix}
	}
	probe = agent.Dependency{Name: "SQS command queue", Check: func(ctx context.Context) error {
		_, err := client.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: aws.String(o.commandQueueURL),
			AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
		return err
	}}
	return pub, cons, blobs, probe, nil
}

// eventGridTransport builds the Event Grid publisher (events to the custom topic), the pulling
// command consumer (the namespace topic's queue subscription) and, with --blob-container, the Blob
// claim-check store. Credentials come from azidentity's default chain: in AKS, Workload Identity
// (the federated service account token, AZURE_CLIENT_ID and AZURE_TENANT_ID the webhook injects);
// shared keys only for local endpoints (eventgrid.EnvTopicKey, EnvNamespaceKey).
func eventGridTransport(o options, blobs events.BlobStore) (queue.Publisher, queue.Consumer, events.BlobStore, error) {
	if o.egTopicEndpoint == "" || o.egNamespace == "" {
		return nil, nil, nil, errors.New("--eventgrid-topic-endpoint and --eventgrid-namespace-endpoint: required with --transport eventgrid")
	}
	cred, err := azidentity.NewDefaultAzureCredential(nil)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("azure credential: %w", err)
	}
	cfg := eventgrid.Config{Cluster: o.cluster, EventsTopicEndpoint: o.egTopicEndpoint, NamespaceEndpoint: o.egNamespace,
		CommandsTopic: o.commandsTopic, CommandsSubscription: o.commandsSubscription, Credential: cred, ClientOptions: o.azureClientOptions}
	pub, err := cfg.Publisher()
	if err != nil {
		return nil, nil, nil, err
	}
	// The agent only publishes events; commands are the functions' to send.
	delete(pub.Namespaces, queue.CommandsSubject(o.cluster))
	rc, err := cfg.Receiver()
	if err != nil {
		return nil, nil, nil, err
	}
	cc := eventgrid.ConsumerConfig{Receiver: rc, Subject: queue.CommandsSubject(o.cluster), Source: "agent"}
	blobOpts := &container.ClientOptions{ClientOptions: o.azureClientOptions}
	if o.deadLetterContainer != "" {
		c, err := azureblob.NewContainer(o.storageAccountURL, o.deadLetterContainer, cred, blobOpts)
		if err != nil {
			return nil, nil, nil, err
		}
		cc.DeadLetters = &azureblob.DeadLetters{Container: c}
	}
	cons, err := eventgrid.NewConsumer(cc)
	if err != nil {
		return nil, nil, nil, err
	}
	if o.blobContainer != "" {
		c, err := azureblob.NewContainer(o.storageAccountURL, o.blobContainer, cred, blobOpts)
		if err != nil {
			return nil, nil, nil, err
		}
		blobs = &azureblob.Store{Container: c}
	}
	return pub, cons, blobs, nil
}
