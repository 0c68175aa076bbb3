// Package runtime starts a Dovetail function the way its environment asks: under AWS Lambda
// (aws-lambda-go, SQS batches with partial batch responses) when Lambda started the process, as
// an Azure Functions custom handler (Event Grid trigger; commands to an Event Grid namespace
// topic) when the Functions host started it, otherwise as a long-running NATS JetStream worker.
// Flags (cobra) configure each; every flag also reads an environment variable (DOVETAIL_<FLAG>),
// which is how Lambda and Functions app settings pass them. The Lambda build (-tags
// lambda.norpc, hack/package.sh) has only the Lambda mode: the other two fail with an error that
// says so (azure_lambda.go, nats_lambda.go), and their clients stay out of the bootstrap.
package runtime

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/shared/awsconfig"
	"github.com/dovetail-dev/dovetail/shared/queue"
	"github.com/dovetail-dev/dovetail/shared/queue/nats/natsauth"
	"github.com/dovetail-dev/dovetail/shared/queue/s3blob"
	"github.com/dovetail-dev/dovetail/shared/queue/sqs"
	"github.com/dovetail-dev/dovetail/shared/telemetry"
	"github.com/dovetail-dev/dovetail/shared/telemetry/emf"
)

// DefaultHTTPAddr is where a NATS worker serves /metrics, /healthz and /readyz: Karpenter's
// metrics port (8080), so a ServiceMonitor written for Karpenter finds it.
const DefaultHTTPAddr = ":8080"

// Mode is how a function runs.
type Mode string

const (
	ModeLambda Mode = "lambda"
	ModeNATS   Mode = "nats"
	// ModeAzureFunctions is defined in azure.go.
)

// Transport is what a function's Build gets: where to publish and where claim-checked payloads live.
type Transport struct {
	Mode    Mode
	Cluster string
	// Function is the running function's name (Function.Name).
	Function string
	// Publisher publishes commands (queue.CommandsSubject) and events (queue.EventsSubject).
	// Under Lambda it is an SQS Publisher routed by --command-queue-url and --event-queue-url.
	Publisher queue.Publisher
	// Blobs is the claim-check store: S3 under Lambda (--blob-bucket), a directory for NATS
	// (--blob-dir), or nil (oversize payloads refused).
	Blobs events.BlobStore
	// AWS is the SDK config of the SQS and S3 clients (Lambda mode; nil for NATS).
	AWS *aws.Config
	// Follow, in NATS mode (nil under Lambda), feeds handler every message of subject in the
	// cluster's stream from the last one stored until ctx ends, for a function that keeps a view
	// of a second subject beside the one it consumes: shared/queue/nats.Follow on the worker's
	// connection, logging to Logger. A function, not the connection, so that the Lambda build
	// links no NATS client (nats.go).
	Follow func(ctx context.Context, subject string, handler queue.Handler) error
	Logger *slog.Logger
	// Metrics is the mode's telemetry backend (Prometheus on --http-addr for a NATS worker,
	// CloudWatch EMF on stdout under Lambda); handlers record their decisions on it.
	Metrics telemetry.Recorder
}

// Function describes one function binary.
type Function struct {
	// Name is the function (an RFC 1123 label): the NATS durable consumer and the log's "function".
	Name  string
	Short string
	// Subject is what the function consumes in NATS mode; default queue.EventsSubject. (Under
	// Lambda the event source mapping decides.)
	Subject func(cluster string) string
	// MaxDeliver is the NATS consumer's delivery limit (0: qnats.DefaultMaxDeliver); under
	// Lambda the queue's redrive policy (maxReceiveCount) sets it.
	MaxDeliver int
	// MaxAckPending is how many messages the NATS consumer may hold unacknowledged (0: one, in
	// order). Messages that wait (queue.RetryAfter) hold a slot until they come back, so a
	// function whose messages are independent (notices of different instances) allows many.
	MaxAckPending int
	// Flags adds the function's own flags (bind their env defaults with EnvDefault).
	Flags func(fs *pflag.FlagSet)
	// Build makes the handler once the transport is ready. It runs once per process (once per
	// Lambda execution environment, before the first invocation).
	Build func(ctx context.Context, t Transport) (queue.Handler, error)
}

// Options are the common flags, filled by Command.
type Options struct {
	Cluster string
	// NATS mode.
	NATSURL string
	// NATSAuth is the worker's credentials and TLS (--nats-creds, --nats-nkey-seed, --nats-tls-*);
	// it connects with the function role's permissions (natsauth.RoleFunction).
	NATSAuth     natsauth.Client
	EnsureStream bool
	BlobDir      string
	// Lambda mode.
	CommandQueueURL, EventQueueURL, DeadLetterURL string
	BlobBucket, BlobPrefix                        string
	S3PathStyle                                   bool
	// Azure Functions mode.
	EventGridNamespace, CommandsTopic, EventGridTopicEndpoint string
	StorageAccountURL, BlobContainer, DeadLetterContainer     string
	// OTLPEndpoint is the OTLP/HTTP metrics URL an Azure Functions handler exports to (Azure
	// Monitor's OpenTelemetry ingestion or a collector; empty: no metrics), OTLPScope the
	// Entra ID scope of the bearer token it sends (empty: none, for a collector without auth).
	OTLPEndpoint, OTLPScope string
	// AzureClientOptions are the Azure SDK clients' options (not a flag: a test's transport);
	// an empty struct in the Lambda build, which has no Azure Functions mode (azure.go).
	AzureClientOptions AzureClientOptions
	LogLevel           string
	// HTTPAddr is where a NATS worker serves /metrics, /healthz and /readyz (empty: no server).
	HTTPAddr string
}

// EnvCustomHandlerPort is set by the Azure Functions host for a custom handler it starts: the
// port the handler's HTTP server must listen on (Azure Functions documentation, "Azure Functions
// custom handlers").
const EnvCustomHandlerPort = "FUNCTIONS_CUSTOMHANDLER_PORT"

// ModeAzureFunctions runs the function as an Azure Functions custom handler (azure.go; not in
// the Lambda build).
const ModeAzureFunctions Mode = "azure-functions"

// InAzureFunctions reports whether the Azure Functions host started the process.
func InAzureFunctions() bool { return os.Getenv(EnvCustomHandlerPort) != "" }

// EnvName is the environment variable of a flag: "command-queue-url" → DOVETAIL_COMMAND_QUEUE_URL.
func EnvName(flag string) string {
	return "DOVETAIL_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// EnvDefault returns the flag's environment variable if set, else def.
func EnvDefault(flag, def string) string {
	if v, ok := os.LookupEnv(EnvName(flag)); ok {
		return v
	}
	return def
}

// EnvBool is EnvDefault for a boolean flag; an unparsable value keeps def.
func EnvBool(flag string, def bool) bool {
	if v, ok := os.LookupEnv(EnvName(flag)); ok {
		if b, err := strconv.ParseBool(v); err == nil {
			return b
		}
	}
	return def
}

// Main runs Command(f) and exits 1 on error.
func Main(f Function) {
	if err := Command(f).Execute(); err != nil {
		os.Exit(1)
	}
}

// Command is the function's cobra command: it builds the transport for the mode, calls f.Build
// and runs the handler until SIGTERM/SIGINT (NATS) or for the life of the execution
// environment (Lambda).
func Command(f Function) *cobra.Command {
	o := &Options{}
	cmd := &cobra.Command{
		Use:          f.Name,
		Short:        f.Short,
		SilenceUsage: true,
		Args:         cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return Run(ctx, f, *o)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.Cluster, "cluster", EnvDefault("cluster", ""), "cluster name (RFC 1123 label); env "+EnvName("cluster"))
	fs.StringVar(&o.NATSURL, "nats-url", EnvDefault("nats-url", "nats://127.0.0.1:4222"), "NATS mode: server URL")
	o.NATSAuth.AddFlags(fs)
	fs.BoolVar(&o.EnsureStream, "ensure-stream", EnvBool("ensure-stream", true), "NATS mode: create or update the cluster's stream at start")
	fs.StringVar(&o.BlobDir, "blob-dir", EnvDefault("blob-dir", ""), "NATS mode: claim-check directory; empty: refuse oversize payloads")
	fs.StringVar(&o.CommandQueueURL, "command-queue-url", EnvDefault("command-queue-url", ""), "Lambda mode: SQS queue URL commands are published to (required)")
	fs.StringVar(&o.EventQueueURL, "event-queue-url", EnvDefault("event-queue-url", ""), "Lambda mode: SQS queue URL for events the function publishes (optional)")
	fs.StringVar(&o.DeadLetterURL, "dlq-url", EnvDefault("dlq-url", ""), "Lambda mode: dead-letter queue URL for poison records; empty: left to the redrive policy")
	fs.StringVar(&o.BlobBucket, "blob-bucket", EnvDefault("blob-bucket", ""), "Lambda mode: S3 bucket of claim-checked payloads; empty: refuse oversize payloads")
	fs.StringVar(&o.BlobPrefix, "blob-prefix", EnvDefault("blob-prefix", s3blob.DefaultPrefix), "Lambda and Azure Functions modes: key prefix of claim-checked payloads (the lifecycle rule expires it)")
	fs.BoolVar(&o.S3PathStyle, "s3-path-style", EnvBool("s3-path-style", false), "Lambda mode: path-style S3 addressing (local endpoints)")
	registerAzureFlags(fs, o)
	fs.StringVar(&o.LogLevel, "log-level", EnvDefault("log-level", "info"), "debug, info, warn or error")
	fs.StringVar(&o.HTTPAddr, "http-addr", EnvDefault("http-addr", DefaultHTTPAddr), "NATS mode: address of the HTTP server for /metrics (Prometheus), /healthz and /readyz; empty: none")
	if f.Flags != nil {
		f.Flags(fs)
	}
	return cmd
}

// Run builds the transport of the mode InLambda chooses, builds the handler and runs it.
func Run(ctx context.Context, f Function, o Options) error {
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.LogLevel)); err != nil {
		return fmt.Errorf("--log-level %q: %w", o.LogLevel, err)
	}
	// JSON lines on stderr: CloudWatch Logs under Lambda, any collector elsewhere.
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level})).With("function", f.Name)
	slog.SetDefault(log)
	if !events.ValidName(o.Cluster) {
		return fmt.Errorf("--cluster (%s) %q: must be an RFC 1123 label", EnvName("cluster"), o.Cluster)
	}
	if !events.ValidName(f.Name) || f.Build == nil {
		return fmt.Errorf("function %q: needs an RFC 1123 name and a Build", f.Name)
	}
	if InLambda() {
		return runLambda(ctx, f, o, log)
	}
	if InAzureFunctions() {
		return runAzure(ctx, f, o, log)
	}
	return runNATS(ctx, f, o, log)
}

func runLambda(ctx context.Context, f Function, o Options, log *slog.Logger) error {
	if o.CommandQueueURL == "" {
		return fmt.Errorf("--command-queue-url (%s): required under Lambda", EnvName("command-queue-url"))
	}
	// The SDK's settings as Lambda passes them: the execution role's credentials, AWS_REGION, and
	// AWS_ENDPOINT_URL(_SQS/_S3) for local endpoints (awsconfig.Load).
	cfg, err := awsconfig.Load(ctx, awsconfig.Options{})
	if err != nil {
		return fmt.Errorf("aws config: %w", err)
	}
	sqsClient := awssqs.NewFromConfig(cfg)
	routes := map[string]string{queue.CommandsSubject(o.Cluster): o.CommandQueueURL}
	if o.EventQueueURL != "" {
		routes[queue.EventsSubject(o.Cluster)] = o.EventQueueURL
	}
	// Metrics as CloudWatch EMF on stdout, flushed after every batch (LambdaHandler).
	rec := &emf.Recorder{Out: os.Stdout, Dimensions: map[string]string{"cluster": o.Cluster}}
	t := Transport{Mode: ModeLambda, Cluster: o.Cluster, Function: f.Name, AWS: &cfg, Logger: log, Metrics: rec,
		Publisher: &sqs.Publisher{Client: sqsClient, Routes: routes}}
	if o.BlobBucket != "" {
		s3c := s3.NewFromConfig(cfg, func(so *s3.Options) { so.UsePathStyle = o.S3PathStyle })
		t.Blobs = &s3blob.Store{Client: s3c, Bucket: o.BlobBucket, Prefix: o.BlobPrefix}
	}
	h, err := f.Build(ctx, t)
	if err != nil {
		return fmt.Errorf("building the %s handler: %w", f.Name, err)
	}
	log.Info("starting under Lambda", "cluster", o.Cluster, "dlq", o.DeadLetterURL != "")
	lambda.StartWithOptions(LambdaHandler(h, LambdaOptions{SQS: sqsClient, DeadLetterURL: o.DeadLetterURL, Logger: log,
		Function: f.Name, Metrics: rec}),
		lambda.WithContext(ctx))
	return nil // not reached: the Lambda loop exits the process
}
