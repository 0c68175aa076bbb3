package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/dovetail-dev/dovetail/shared/queue"
	"github.com/dovetail-dev/dovetail/shared/queue/sqs"
	"github.com/dovetail-dev/dovetail/shared/telemetry"
)

// EnvLambdaRuntimeAPI is set by Lambda (and by the Runtime Interface Emulator) for the runtime
// it starts: the host:port of the Lambda Runtime API (AWS Lambda Developer Guide, "Defined
// runtime environment variables").
const EnvLambdaRuntimeAPI = "AWS_LAMBDA_RUNTIME_API"

// InLambda reports whether the process was started by Lambda.
func InLambda() bool { return os.Getenv(EnvLambdaRuntimeAPI) != "" }

// LambdaOptions configures LambdaHandler.
type LambdaOptions struct {
	// SQS and DeadLetterURL, when both set, receive poison records directly (see LambdaHandler).
	// SQS also re-drives records whose error asks for it (queue.RetryAfter): it must then
	// resolve queue URLs (GetQueueUrl, as the SDK client does).
	SQS           sqs.API
	DeadLetterURL string
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Function names the function in metrics; Metrics receives the handler's duration and
	// queue age per record and the dead letters sent, and is flushed (telemetry.Flush) once the
	// batch is done, before the response returns to Lambda. nil: none.
	Function string
	Metrics  telemetry.Recorder
}

// LambdaHandler adapts a queue.Handler to an SQS-triggered Lambda function whose event source
// mapping has FunctionResponseTypes [ReportBatchItemFailures]. It runs h on each record in order
// and returns the records that must come back in BatchItemFailures (by messageId); Lambda deletes
// the others (AWS Lambda Developer Guide, "Handling errors for an SQS event source": partial
// batch responses). It never returns an error, so one bad record neither blocks nor loses the
// others.
//
// Per record: nil → done. A transient error (or a panic) → reported; on a FIFO queue the later
// records of the same message group are reported too without running, so the group's order
// holds. A transient error that asks to come back soon (queue.RetryAfter) also sets the
// record's visibility to that delay (ChangeMessageVisibility with its receipt handle), so it is
// re-driven within seconds instead of after the queue's visibility timeout: how a notice
// waiting for its drain start keeps its deadline on Lambda. A poison record (queue.ErrPoison) is logged with its reason and then:
//
//   - sent straight to the dead-letter queue (DeadLetterURL) with the reason as the
//     "dovetail-dlq-reason" message attribute, and reported done, so Lambda deletes it; or
//   - when no DeadLetterURL is configured or that send fails, reported as a failure, so SQS's
//     redrive policy moves it to the same dead-letter queue after maxReceiveCount receives.
//
// Why the direct send is the primary path: the event queue is FIFO with the cluster as message
// group, and SQS holds back a group while its head message is failing, so a poison message left
// to the redrive would stall every decision for the cluster for maxReceiveCount × the visibility
// timeout (5 × 6 × the function timeout with the infra defaults); it would also reach the DLQ
// without its reason. The redrive stays as the net for workers that die and for a failed send,
// so nothing is ever dropped. A poison record does not hold back later records of its group:
// it will never be processed, and skipping it is what the dead-letter move does anyway.
func LambdaHandler(h queue.Handler, o LambdaOptions) func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	urls := &queueURLs{api: o.SQS}
	rec := telemetry.OrNop(o.Metrics)
	h = Instrument(o.Function, h, rec, nil)
	return func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		defer func() {
			if err := telemetry.Flush(context.WithoutCancel(ctx), rec); err != nil {
				log.Warn("flushing metrics", "err", err)
			}
		}()
		resp := events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{}}
		fail := func(r events.SQSMessage) {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: r.MessageId})
		}
		blocked := map[string]bool{}
		for _, r := range ev.Records {
			group := r.Attributes["MessageGroupId"]
			if ctx.Err() != nil || (group != "" && blocked[group]) {
				fail(r) // not run: out of time, or behind a failed record of its group
				continue
			}
			msg := recordMessage(r)
			rlog := log.With("messageId", r.MessageId, "id", msg.ID, "attempt", msg.Attempt, "source", r.EventSourceARN)
			err := runRecord(ctx, h, msg, rlog)
			switch {
			case err == nil:
			case errors.Is(err, queue.ErrPoison):
				rlog.Error("poison message", "reason", err.Error())
				if o.SQS == nil || o.DeadLetterURL == "" {
					rlog.Warn("no dead-letter URL configured; reporting the failure so the redrive policy moves it after maxReceiveCount")
					fail(r)
					continue
				}
				if err := sqs.SendDeadLetter(ctx, o.SQS, o.DeadLetterURL, deadLetter(r, msg, err.Error())); err != nil {
					rlog.Error("dead-letter send failed; reporting the failure so the redrive policy moves it", "err", err)
					fail(r)
					continue
				}
				rlog.Info("poison message sent to the dead-letter queue", "dlq", o.DeadLetterURL)
				rec.Record(telemetry.DeadLettered, 1, o.Function, PoisonClass(err))
			default:
				rlog.Warn("handler failed; the record will be redelivered", "err", err)
				if d, ok := queue.RetryDelay(err); ok {
					redrive(ctx, urls, r, d, rlog)
				}
				fail(r)
				if group != "" {
					blocked[group] = true
				}
			}
		}
		return resp, nil
	}
}

func runRecord(ctx context.Context, h queue.Handler, msg queue.Message, log *slog.Logger) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("handler panic: %v", r)
			log.Error("handler panicked", "panic", r, "stack", string(debug.Stack()))
		}
	}()
	return h(ctx, msg)
}

// recordMessage converts a Lambda SQS record like sqs.Message converts a received message.
func recordMessage(r events.SQSMessage) queue.Message {
	attr := func(name string) string {
		if v, ok := r.MessageAttributes[name]; ok && v.StringValue != nil {
			return *v.StringValue
		}
		return ""
	}
	id := attr(sqs.AttrID)
	if id == "" {
		id = r.Attributes["MessageDeduplicationId"]
	}
	if id == "" {
		id = r.MessageId
	}
	return queue.Message{ID: id, Subject: attr(sqs.AttrSubject), Data: []byte(r.Body),
		Attempt: sqs.ReceiveCount(r.Attributes["ApproximateReceiveCount"]), Published: sqs.SentTime(r.Attributes["SentTimestamp"])}
}

func deadLetter(r events.SQSMessage, msg queue.Message, reason string) sqs.DeadLetter {
	attrs := make(map[string]types.MessageAttributeValue, len(r.MessageAttributes))
	for k, v := range r.MessageAttributes {
		attrs[k] = types.MessageAttributeValue{DataType: aws.String(v.DataType), StringValue: v.StringValue, BinaryValue: v.BinaryValue}
	}
	return sqs.DeadLetter{MessageID: r.MessageId, Body: r.Body, GroupID: r.Attributes["MessageGroupId"],
		Attributes: attrs, Reason: reason, Source: r.EventSourceARN, ReceiveCount: msg.Attempt}
}

// redrive sets a failed record's visibility to d (whole seconds, rounded up), so SQS delivers it
// again after d rather than after the queue's visibility timeout. Failing that, the record
// still comes back after the timeout: it is reported failed either way.
func redrive(ctx context.Context, urls *queueURLs, r events.SQSMessage, d time.Duration, log *slog.Logger) {
	if urls.api == nil || r.ReceiptHandle == "" {
		log.Warn("no SQS client to re-drive the record sooner; it returns after the visibility timeout")
		return
	}
	url, err := urls.of(ctx, r.EventSourceARN)
	if err == nil {
		secs := int32((d + time.Second - 1) / time.Second)
		_, err = urls.api.ChangeMessageVisibility(ctx, &awssqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(url),
			ReceiptHandle: aws.String(r.ReceiptHandle), VisibilityTimeout: secs})
	}
	if err != nil {
		log.Warn("re-driving the record sooner failed; it returns after the visibility timeout", "err", err)
		return
	}
	log.Info("record re-driven", "after", d)
}

// queueURLs resolves SQS queue ARNs ("arn:aws:sqs:<region>:<account>:<name>") to queue URLs with
// GetQueueUrl, once per ARN for the life of the execution environment.
type queueURLs struct {
	api   sqs.API
	mu    sync.Mutex
	cache map[string]string
}

type getQueueURL interface {
	GetQueueUrl(ctx context.Context, in *awssqs.GetQueueUrlInput, opts ...func(*awssqs.Options)) (*awssqs.GetQueueUrlOutput, error)
}

func (u *queueURLs) of(ctx context.Context, arn string) (string, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if url, ok := u.cache[arn]; ok {
		return url, nil
	}
	parts := strings.Split(arn, ":")
	if len(parts) != 6 || parts[0] != "arn" || parts[2] != "sqs" {
		return "", fmt.Errorf("event source %q is not an SQS queue ARN", arn)
	}
	g, ok := u.api.(getQueueURL)
	if !ok {
		return "", fmt.Errorf("the SQS client cannot resolve queue URLs (GetQueueUrl)")
	}
	out, err := g.GetQueueUrl(ctx, &awssqs.GetQueueUrlInput{QueueName: aws.String(parts[5]), QueueOwnerAWSAccountId: aws.String(parts[4])})
	if err != nil {
		return "", fmt.Errorf("GetQueueUrl of %s: %w", arn, err)
	}
	if u.cache == nil {
		u.cache = map[string]string{}
	}
	u.cache[arn] = aws.ToString(out.QueueUrl)
	return u.cache[arn], nil
}
