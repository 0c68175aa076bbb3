//go:build !lambda.norpc

// The Azure Functions mode links the Azure SDK (azidentity, Event Grid, azblob with Arrow):
// left out of the Lambda build (-tags lambda.norpc, azure_lambda.go), which runs only on AWS.

package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/spf13/pflag"

	"github.com/dovetail-dev/dovetail/shared/queue"
	"github.com/dovetail-dev/dovetail/shared/queue/azureblob"
	"github.com/dovetail-dev/dovetail/shared/queue/eventgrid"
	"github.com/dovetail-dev/dovetail/shared/telemetry"
	"github.com/dovetail-dev/dovetail/shared/telemetry/otlp"
)

// DefaultTriggerBinding is the name of the eventGridTrigger binding in each function.json of
// infra/azure: the key of the event in the invocation's Data.
const DefaultTriggerBinding = "event"

// MaxInvocationBytes bounds an invocation request: Event Grid events are at most 1 MB
// (eventgrid.MaxEventBytes), and the host's envelope and metadata add little.
const MaxInvocationBytes = 2 << 20

// EventsRouteSuffix names a function's second route: "/<function>-events" carries the agent's
// events to a function whose own subject is another (interruption: notices on "/interruption",
// snapshots on "/interruption-events").
const EventsRouteSuffix = "-events"

// The custom handler's timeouts. The Functions host, on loopback, sends an invocation's request
// whole at once, so a header or body still unread after seconds is a stalled or hostile client:
// cut off before it can hold the instance's one-at-a-time lock (the body is read before the lock
// is taken). AzureReadTimeout is the handler's deadline on the body, not the server's
// ReadTimeout: net/http keeps that deadline on the connection's background read after the body,
// whose expiry cancels the request's context, so an invocation running past it would be
// cancelled. An invocation runs at most host.json's functionTimeout (infra/azure: 5 minutes; the
// host fails it then), and waits for the lock behind the one running, so the response may be
// written up to a minute past it; past that the host has given up.
const (
	AzureReadHeaderTimeout = 10 * time.Second
	AzureReadTimeout       = 30 * time.Second
	AzureWriteTimeout      = 6 * time.Minute
	AzureIdleTimeout       = 2 * time.Minute
)

// serverTimeouts are the custom handler server's timeouts (net/http: ReadHeaderTimeout,
// WriteTimeout, IdleTimeout); it has no ReadTimeout (see AzureReadTimeout).
type serverTimeouts struct {
	readHeader, write, idle time.Duration
}

var azureTimeouts = serverTimeouts{readHeader: AzureReadHeaderTimeout, write: AzureWriteTimeout, idle: AzureIdleTimeout}

func (t serverTimeouts) server(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: t.readHeader, WriteTimeout: t.write, IdleTimeout: t.idle}
}

func runAzure(ctx context.Context, f Function, o Options, log *slog.Logger) error {
	if o.EventGridNamespace == "" {
		return fmt.Errorf("--eventgrid-namespace-endpoint (%s): required under Azure Functions (commands are sent there)", EnvName("eventgrid-namespace-endpoint"))
	}
	// The function's user-assigned managed identity (AZURE_CLIENT_ID), or any other source of
	// the default chain; keys only for local endpoints (eventgrid.EnvTopicKey, …).
	cred, err := azidentity.NewDefaultAzureCredential(nil)
	if err != nil {
		return fmt.Errorf("azure credential: %w", err)
	}
	pub, err := eventgrid.Config{Cluster: o.Cluster, EventsTopicEndpoint: o.EventGridTopicEndpoint, NamespaceEndpoint: o.EventGridNamespace,
		CommandsTopic: o.CommandsTopic, Credential: cred, ClientOptions: o.AzureClientOptions}.Publisher()
	if err != nil {
		return err
	}
	rec, err := azureMetrics(ctx, f, o, cred, log)
	if err != nil {
		return err
	}
	if o, ok := rec.(*otlp.Recorder); ok {
		defer func() {
			if err := o.Shutdown(context.WithoutCancel(ctx)); err != nil {
				log.Warn("flushing metrics at exit", "err", err)
			}
		}()
	}
	t := Transport{Mode: ModeAzureFunctions, Cluster: o.Cluster, Function: f.Name, Publisher: pub, Logger: log, Metrics: rec}
	var dead azureblob.DeadLetterWriter
	if o.BlobContainer != "" {
		c, err := azureblob.NewContainer(o.StorageAccountURL, o.BlobContainer, cred, o.blobOptions())
		if err != nil {
			return err
		}
		t.Blobs = &azureblob.Store{Container: c, Prefix: o.BlobPrefix}
	}
	if o.DeadLetterContainer != "" {
		c, err := azureblob.NewContainer(o.StorageAccountURL, o.DeadLetterContainer, cred, o.blobOptions())
		if err != nil {
			return err
		}
		dead = &azureblob.DeadLetters{Container: c}
	}
	h, err := f.Build(ctx, t)
	if err != nil {
		return fmt.Errorf("building the %s handler: %w", f.Name, err)
	}
	subject := queue.EventsSubject(o.Cluster)
	if f.Subject != nil {
		subject = f.Subject(o.Cluster)
	}
	routes := map[string]string{f.Name: subject, f.Name + EventsRouteSuffix: queue.EventsSubject(o.Cluster)}
	srv := azureTimeouts.server(AzureFunctionsHandler(h, AzureOptions{Routes: routes, DeadLetters: dead, Source: f.Name, Logger: log, Metrics: rec}))
	// The host calls the handler on loopback; nothing else needs to reach it.
	ln, err := net.Listen("tcp", "127.0.0.1:"+os.Getenv(EnvCustomHandlerPort))
	if err != nil {
		return fmt.Errorf("%s: %w", EnvCustomHandlerPort, err)
	}
	log.Info("starting as an Azure Functions custom handler", "cluster", o.Cluster, "addr", ln.Addr().String(), "deadLetters", dead != nil)
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = srv.Shutdown(shut)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// azureMetrics is the Azure Functions mode's metrics backend: OpenTelemetry over OTLP/HTTP to
// o.OTLPEndpoint (package otlp), signed with a token of cred for o.OTLPScope, or none when no
// endpoint is configured.
func azureMetrics(ctx context.Context, f Function, o Options, cred azcore.TokenCredential, log *slog.Logger) (telemetry.Recorder, error) {
	if o.OTLPEndpoint == "" {
		log.Info("no --otlp-metrics-endpoint: metrics are not exported")
		return telemetry.Nop, nil
	}
	opts := otlp.Options{Endpoint: o.OTLPEndpoint, Function: f.Name, Cluster: o.Cluster, Scope: o.OTLPScope}
	if o.OTLPScope != "" {
		opts.Credential = cred
	}
	rec, err := otlp.New(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("--otlp-metrics-endpoint (%s): %w", EnvName("otlp-metrics-endpoint"), err)
	}
	log.Info("exporting metrics over OTLP", "endpoint", o.OTLPEndpoint, "entraToken", opts.Credential != nil)
	return rec, nil
}

// AzureOptions configures AzureFunctionsHandler.
type AzureOptions struct {
	// Routes maps a function name (the request path "/<name>", the folder of its function.json)
	// to the subject of its events. A path not listed answers 404.
	Routes map[string]string
	// Binding is the trigger binding's name; default DefaultTriggerBinding.
	Binding string
	// DeadLetters receives poison events with their reason; nil fails their invocation instead,
	// so Event Grid retries and finally dead-letters them without the reason.
	DeadLetters azureblob.DeadLetterWriter
	// Source names the function in dead letters and in metrics.
	Source string
	Logger *slog.Logger
	// Metrics receives each invocation's handler duration and queue age and the dead letters
	// written, and is flushed (telemetry.Flush) after every invocation: a Consumption plan
	// instance may be frozen or recycled between requests. nil: none.
	Metrics telemetry.Recorder
	// ReadTimeout bounds the reading of an invocation's request body; default AzureReadTimeout.
	ReadTimeout time.Duration
}

// invokeRequest and invokeResponse are the custom handler's documented payloads.
type invokeRequest struct {
	Data     map[string]json.RawMessage
	Metadata map[string]any
}

type invokeResponse struct {
	Outputs     map[string]any
	Logs        []string
	ReturnValue any
}

// AzureFunctionsHandler serves the Functions host's invocations of Event Grid-triggered
// functions: POST /<function> with {"Data": {"<binding>": <CloudEvent>}, "Metadata": {…}} (the
// event as a JSON object, or as a JSON string holding it). One invocation is one event; the
// host's Event Grid extension invokes once per event of a delivered batch and fails the
// delivery when any invocation failed, so Event Grid delivers the whole batch again: handlers
// are idempotent (DESIGN invariant 2).
//
// Per event: nil → 200. queue.ErrPoison (or an invocation whose event cannot be read) → the
// dead letter with the reason, then 200, so the batch's good events are not delivered again
// for it; if the write fails or no writer is set → 500. Any other error (or a panic) → 500:
// Event Grid retries, and after the subscription's maxDeliveryAttempts dead-letters it to the
// storage dead-letter destination (deadLetterReason MaxDeliveryAttemptsExceeded). The host does
// not pass Event Grid's delivery count, so Message.Attempt is 1.
//
// The request is read (at most MaxInvocationBytes, within AzureReadTimeout) before the
// invocation waits for its turn, so a stalled body never holds the turn; a body that cannot be
// read (the client stalled or went away) answers 400 and is not dead-lettered: the host fails
// the invocation and Event Grid delivers the event again.
//
// Invocations run one at a time: Event Grid keeps no order and may deliver concurrently, and one
// decision at a time per cluster (DESIGN invariant 3) is kept within the instance; infra/azure
// limits each function app to one instance, and commands carry their snapshot revision, which
// the agent checks.
func AzureFunctionsHandler(h queue.Handler, o AzureOptions) http.Handler {
	if o.Binding == "" {
		o.Binding = DefaultTriggerBinding
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.ReadTimeout <= 0 {
		o.ReadTimeout = AzureReadTimeout
	}
	rec := telemetry.OrNop(o.Metrics)
	h = Instrument(o.Source, h, rec, nil)
	var one sync.Mutex
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		subject, ok := o.Routes[strings.TrimPrefix(r.URL.Path, "/")]
		if !ok || r.Method != http.MethodPost {
			http.Error(w, "no function at "+r.Method+" "+r.URL.Path, http.StatusNotFound)
			return
		}
		// The body's deadline, lifted once it is read (see AzureReadTimeout); a connection that
		// supports none (ErrNotSupported) is read without.
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(time.Now().Add(o.ReadTimeout))
		msg, meta, err := readInvocation(r, o.Binding)
		var unread *unreadError
		if errors.As(err, &unread) {
			// The deadline stays passed: net/http drains an unread body before answering, which
			// without one would wait on the stalled client for ever; the connection then closes.
			_ = rc.SetReadDeadline(time.Now())
			o.Logger.Warn("invocation request not read; the host will fail it and Event Grid deliver again", "path", r.URL.Path, "err", err)
			w.Header().Set("Connection", "close")
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		_ = rc.SetReadDeadline(time.Time{})
		one.Lock()
		defer one.Unlock()
		status, resp := invoke(r.Context(), r, msg, meta, err, h, subject, o, rec)
		if err := telemetry.Flush(context.WithoutCancel(r.Context()), rec); err != nil {
			o.Logger.Warn("flushing metrics", "err", err)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(resp)
	})
}

// invoke runs the invocation readInvocation read (err: why it could not be, a poison).
func invoke(ctx context.Context, r *http.Request, msg queue.Message, meta string, err error, h queue.Handler, subject string, o AzureOptions, rec telemetry.Recorder) (int, invokeResponse) {
	msg.Subject = subject
	log := o.Logger.With("path", r.URL.Path, "id", msg.ID, "invocationId", r.Header.Get("X-Azure-Functions-InvocationId"))
	if err == nil {
		err = runRecord(ctx, h, msg, log)
	}
	resp := invokeResponse{Outputs: map[string]any{}}
	switch {
	case err == nil:
		return http.StatusOK, resp
	case errors.Is(err, queue.ErrPoison):
		log.Error("poison event", "reason", err.Error())
		resp.Logs = append(resp.Logs, "poison event "+msg.ID+": "+err.Error())
		if o.DeadLetters == nil {
			resp.Logs = append(resp.Logs, "no dead-letter container configured; failing the invocation for Event Grid's dead-lettering")
			return http.StatusInternalServerError, resp
		}
		id := msg.ID
		if id == "" {
			id = "invocation-" + meta
		}
		d := azureblob.DeadLetter{Reason: err.Error(), DeliveryAttempts: msg.Attempt, Source: o.Source, EventID: id, Time: time.Now(), Event: msg.Data}
		if werr := o.DeadLetters.WriteDeadLetter(context.WithoutCancel(ctx), d); werr != nil {
			log.Error("dead-letter write failed; failing the invocation so Event Grid retries", "err", werr)
			resp.Logs = append(resp.Logs, "dead-letter write failed: "+werr.Error())
			return http.StatusInternalServerError, resp
		}
		log.Info("poison event dead-lettered")
		rec.Record(telemetry.DeadLettered, 1, o.Source, PoisonClass(err))
		return http.StatusOK, resp
	default:
		log.Warn("handler failed; Event Grid will deliver the event again", "err", err)
		resp.Logs = append(resp.Logs, "handler failed: "+err.Error())
		return http.StatusInternalServerError, resp
	}
}

// unreadError is a request body that could not be read (a stall past the read deadline, a
// client gone): not the event's fault, so not poison.
type unreadError struct{ err error }

func (e *unreadError) Error() string { return "reading the invocation: " + e.err.Error() }
func (e *unreadError) Unwrap() error { return e.err }

// readInvocation reads the request's event. Errors are an *unreadError when the body could not
// be read, else they wrap queue.ErrPoison: an invocation that cannot be parsed never will be.
// meta is a name for it when it has no event id.
func readInvocation(r *http.Request, binding string) (queue.Message, string, error) {
	msg := queue.Message{Attempt: 1}
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxInvocationBytes+1))
	if err != nil {
		return msg, "", &unreadError{err}
	}
	meta := r.Header.Get("X-Azure-Functions-InvocationId")
	if len(body) > MaxInvocationBytes {
		msg.Data = body[:64<<10]
		return msg, meta, fmt.Errorf("%w: invocation payload is larger than %d bytes", queue.ErrPoison, MaxInvocationBytes)
	}
	var req invokeRequest
	if err := json.Unmarshal(body, &req); err != nil {
		msg.Data = body
		return msg, meta, fmt.Errorf("%w: invocation payload: %v", queue.ErrPoison, err)
	}
	if id, ok := req.Metadata["InvocationId"].(string); ok && meta == "" {
		meta = id
	}
	raw, ok := req.Data[binding]
	if !ok {
		msg.Data = body
		return msg, meta, fmt.Errorf("%w: invocation Data.%s: missing (the trigger binding's name)", queue.ErrPoison, binding)
	}
	var s string
	if json.Unmarshal(raw, &s) == nil { // the host may pass the event as a JSON string
		raw = json.RawMessage(s)
	}
	msg.Data = raw
	var head struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return msg, meta, fmt.Errorf("%w: invocation Data.%s: not a CloudEvent: %v", queue.ErrPoison, binding, err)
	}
	msg.ID = head.ID
	return msg, meta, nil
}

// AzureClientOptions are the Azure SDK clients' options (Options.AzureClientOptions).
type AzureClientOptions = azcore.ClientOptions

func (o Options) blobOptions() *container.ClientOptions {
	return &container.ClientOptions{ClientOptions: o.AzureClientOptions}
}

// registerAzureFlags adds the Azure Functions mode's flags.
func registerAzureFlags(fs *pflag.FlagSet, o *Options) {
	fs.StringVar(&o.EventGridNamespace, "eventgrid-namespace-endpoint", EnvDefault("eventgrid-namespace-endpoint", ""), "Azure Functions mode: Event Grid namespace of the commands topic (https://<namespace>.<region>-1.eventgrid.azure.net; required)")
	fs.StringVar(&o.CommandsTopic, "commands-topic", EnvDefault("commands-topic", eventgrid.DefaultCommandsTopic), "Azure Functions mode: the namespace topic commands are sent to")
	fs.StringVar(&o.EventGridTopicEndpoint, "eventgrid-topic-endpoint", EnvDefault("eventgrid-topic-endpoint", ""), "Azure Functions mode: custom topic for events the function publishes (https://<topic>.<region>-1.eventgrid.azure.net/api/events; optional)")
	fs.StringVar(&o.StorageAccountURL, "storage-account-url", EnvDefault("storage-account-url", ""), "Azure Functions mode: Blob endpoint of the storage account (https://<account>.blob.core.windows.net); "+azureblob.EnvConnectionString+" overrides it for local endpoints")
	fs.StringVar(&o.BlobContainer, "blob-container", EnvDefault("blob-container", ""), "Azure Functions mode: container of claim-checked payloads (under --blob-prefix); empty: refuse oversize payloads")
	fs.StringVar(&o.DeadLetterContainer, "dead-letter-container", EnvDefault("dead-letter-container", ""), "Azure Functions mode: container poison events are written to with their reason; empty: left to Event Grid's dead-lettering")
	fs.StringVar(&o.OTLPEndpoint, "otlp-metrics-endpoint", EnvDefault("otlp-metrics-endpoint", os.Getenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")), "Azure Functions mode: OTLP/HTTP metrics URL (https://<ingestion host>/v1/metrics; default OTEL_EXPORTER_OTLP_METRICS_ENDPOINT); empty: no metrics")
	fs.StringVar(&o.OTLPScope, "otlp-token-scope", EnvDefault("otlp-token-scope", otlp.MonitorScope), "Azure Functions mode: Entra ID scope of the bearer token sent with each export (the function's managed identity; only over https); empty: no token")
}
