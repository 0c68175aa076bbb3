package awsinfra

// Helpers over the templates' raw text (sigs.k8s.io/yaml; long-form intrinsics keep the template
// plain YAML) for the structural tests; governance_test.go decides requests against the roles
// as both stacks resolve them.

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/dovetail-dev/dovetail/shared/queue/s3blob"
	"github.com/dovetail-dev/dovetail/shared/queue/sqs"
)

type doc = map[string]any

func load(t *testing.T, path string) doc {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var d doc
	if err := yaml.Unmarshal(b, &d); err != nil { // YAML is a superset of JSON: one parser for both
		t.Fatalf("%s: %v", path, err)
	}
	return d
}

// get walks nested maps (string keys) and lists (int keys).
func get(t *testing.T, v any, path ...any) any {
	t.Helper()
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("path %v: %v is not a map at %q", path, v, k)
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				t.Fatalf("path %v: no item %d", path, k)
			}
			v = l[k]
		}
	}
	return v
}

// statement is an IAM statement in one canonical form, for both sources.
type statement struct {
	Sid, Effect string
	Actions     []string
	Resources   []string
	Conditions  []string // "Operator|key|value1,value2"
}

func (s statement) String() string {
	return fmt.Sprintf("%s %s %v on %v if %v", s.Sid, s.Effect, s.Actions, s.Resources, s.Conditions)
}

func sorted(s []string) []string { s = slices.Clone(s); sort.Strings(s); return s }

// Placeholders both sources reduce to.
var samSubs = strings.NewReplacer(
	"${AWS::Partition}", "{partition}", "${AWS::Region}", "{region}", "${AWS::AccountId}", "{account}",
	"${ClusterName}", "{cluster}", "${ClaimCheckBucket.Arn}", "{bucket}")

var tfSubs = strings.NewReplacer(
	"${local.ec2_arn}", "arn:{partition}:ec2:{region}:{account}",
	"${data.aws_partition.current.partition}", "{partition}", "${data.aws_region.current.region}", "{region}",
	"${data.aws_caller_identity.current.account_id}", "{account}", "${var.cluster_name}", "{cluster}",
	"${aws_s3_bucket.claim_check.arn}", "{bucket}", "${var.node_role_arn}", "{NodeRoleArn}", "${var.kms_key_arn}", "{KmsKeyArn}",
	"${aws_sqs_queue.events.arn}", "{EventQueue}", "${aws_sqs_queue.events_dlq.arn}", "{EventDLQ}",
	"${aws_sqs_queue.commands.arn}", "{CommandQueue}", "${aws_sqs_queue.commands_dlq.arn}", "{CommandDLQ}",
	"${aws_sqs_queue.consolidate_events.arn}", "{ConsolidateEventQueue}", "${aws_sqs_queue.consolidate_events_dlq.arn}", "{ConsolidateEventDLQ}",
	"${aws_sqs_queue.drift_events.arn}", "{DriftEventQueue}", "${aws_sqs_queue.drift_events_dlq.arn}", "{DriftEventDLQ}",
	"${aws_sqs_queue.interruption_events.arn}", "{InterruptionEventQueue}", "${aws_sqs_queue.interruption_events_dlq.arn}", "{InterruptionEventDLQ}",
	"${aws_sqs_queue.lifecycle_events.arn}", "{LifecycleEventQueue}", "${aws_sqs_queue.lifecycle_events_dlq.arn}", "{LifecycleEventDLQ}",
	"${aws_sqs_queue.notices.arn}", "{NoticeQueue}", "${aws_sqs_queue.notices_dlq.arn}", "{NoticeDLQ}",
	"${aws_cloudwatch_log_group.provision.arn}", "arn:{partition}:logs:{region}:{account}:log-group:/aws/lambda/dovetail-{cluster}-provision",
	"${aws_cloudwatch_log_group.consolidate.arn}", "arn:{partition}:logs:{region}:{account}:log-group:/aws/lambda/dovetail-{cluster}-consolidate",
	"${aws_cloudwatch_log_group.drift.arn}", "arn:{partition}:logs:{region}:{account}:log-group:/aws/lambda/dovetail-{cluster}-drift",
	"${aws_cloudwatch_log_group.interruption.arn}", "arn:{partition}:logs:{region}:{account}:log-group:/aws/lambda/dovetail-{cluster}-interruption",
	"${aws_cloudwatch_log_group.lifecycle.arn}", "arn:{partition}:logs:{region}:{account}:log-group:/aws/lambda/dovetail-{cluster}-lifecycle")

// samValue reduces a CloudFormation value (string, Fn::Sub, Fn::GetAtt X.Arn, Ref) to strings.
func samValue(t *testing.T, v any) []string {
	t.Helper()
	switch x := v.(type) {
	case string:
		return []string{x}
	case []any:
		var out []string
		for _, e := range x {
			out = append(out, samValue(t, e)...)
		}
		return out
	case map[string]any:
		if s, ok := x["Fn::Sub"].(string); ok {
			return []string{samSubs.Replace(s)}
		}
		if g, ok := x["Fn::GetAtt"].([]any); ok && len(g) == 2 && g[1] == "Arn" {
			return []string{"{" + g[0].(string) + "}"}
		}
		if r, ok := x["Ref"].(string); ok {
			switch r {
			case "ClusterName":
				return []string{"{cluster}"}
			case "AWS::Region":
				return []string{"{region}"}
			}
			return []string{"{" + r + "}"}
		}
	}
	t.Fatalf("unsupported CloudFormation value %v", v)
	return nil
}

func samStatements(t *testing.T, tmpl doc, role string) []statement {
	t.Helper()
	var out []statement
	for _, p := range get(t, tmpl, "Resources", role, "Properties", "Policies").([]any) {
		for _, raw := range get(t, p, "PolicyDocument", "Statement").([]any) {
			s := raw.(map[string]any)
			// A statement present on a condition (Fn::If [condition, statement, AWS::NoValue]) is
			// read as present: these structural checks hold whether or not it is.
			if alt, ok := s["Fn::If"].([]any); ok && len(alt) == 3 {
				s = alt[1].(map[string]any)
			}
			st := statement{Sid: s["Sid"].(string), Effect: s["Effect"].(string),
				Actions: sorted(samValue(t, s["Action"])), Resources: sorted(samValue(t, s["Resource"]))}
			if c, ok := s["Condition"].(map[string]any); ok {
				for op, kv := range c {
					for k, v := range kv.(map[string]any) {
						st.Conditions = append(st.Conditions, op+"|"+k+"|"+strings.Join(sorted(samValue(t, v)), ","))
					}
				}
			}
			st.Conditions = sorted(st.Conditions)
			out = append(out, st)
		}
	}
	return out
}

func tfStatements(t *testing.T, tf doc, policy string) []statement {
	t.Helper()
	var out []statement
	strs := func(v any) []string {
		var r []string
		for _, e := range v.([]any) {
			r = append(r, tfSubs.Replace(e.(string)))
		}
		return sorted(r)
	}
	stmts := slices.Clone(get(t, tf, "data", "aws_iam_policy_document", policy, "statement").([]any))
	// A dynamic statement (present on a condition) is read as present, after the others, as
	// samStatements reads an Fn::If statement.
	if dyn, ok := get(t, tf, "data", "aws_iam_policy_document", policy).(map[string]any)["dynamic"].(map[string]any); ok {
		switch d := dyn["statement"].(type) {
		case map[string]any:
			stmts = append(stmts, d["content"])
		case []any:
			for _, x := range d {
				stmts = append(stmts, x.(map[string]any)["content"])
			}
		}
	}
	for _, raw := range stmts {
		s := raw.(map[string]any)
		st := statement{Sid: s["sid"].(string), Effect: s["effect"].(string), Actions: strs(s["actions"]), Resources: strs(s["resources"])}
		if cs, ok := s["condition"].([]any); ok {
			for _, c := range cs {
				c := c.(map[string]any)
				st.Conditions = append(st.Conditions, c["test"].(string)+"|"+c["variable"].(string)+"|"+strings.Join(strs(c["values"]), ","))
			}
		}
		st.Conditions = sorted(st.Conditions)
		out = append(out, st)
	}
	return out
}

const (
	clusterRequestTag  = "StringEquals|aws:RequestTag/dovetail.dev/cluster|{cluster}"
	clusterResourceTag = "StringEquals|aws:ResourceTag/dovetail.dev/cluster|{cluster}"
)

func TestQueuesBucketAndFunction(t *testing.T) {
	sam := load(t, "template.yaml")
	res := func(name string, path ...any) any {
		return get(t, sam, append([]any{"Resources", name, "Properties"}, path...)...)
	}
	num := func(v any) float64 { f, _ := v.(float64); return f }
	fnTimeout := num(res("ProvisionFunction", "Timeout"))
	for q, dlq := range map[string]string{"EventQueue": "EventDLQ", "CommandQueue": "CommandDLQ"} {
		if res(q, "FifoQueue") != true || res(dlq, "FifoQueue") != true {
			t.Errorf("%s and %s must be FIFO (ordering per cluster; a FIFO queue's DLQ must be FIFO)", q, dlq)
		}
		if got := fmt.Sprint(samValue(t, res(q, "RedrivePolicy", "deadLetterTargetArn"))); got != "[{"+dlq+"}]" {
			t.Errorf("%s redrives to %s, want %s", q, got, dlq)
		}
		if n := num(res(q, "RedrivePolicy", "maxReceiveCount")); n != sqs.DefaultMaxReceives {
			t.Errorf("%s maxReceiveCount %v, want %d", q, n, sqs.DefaultMaxReceives)
		}
		if n := num(res(q, "MaximumMessageSize")); n != sqs.MaxMessageBytes {
			t.Errorf("%s MaximumMessageSize %v, want %d (the size the publisher and claim check are built for)", q, n, sqs.MaxMessageBytes)
		}
	}
	// AWS Lambda Developer Guide ("Using Lambda with Amazon SQS"): visibility timeout at least 6x the function timeout.
	if v := num(res("EventQueue", "VisibilityTimeout")); fnTimeout <= 0 || v < 6*fnTimeout {
		t.Errorf("event queue visibility %vs, function timeout %vs: want >= 6x", v, fnTimeout)
	}
	rule := res("ClaimCheckBucket", "LifecycleConfiguration", "Rules", 0).(map[string]any)
	if rule["Status"] != "Enabled" || rule["Prefix"] != s3blob.DefaultPrefix || num(rule["ExpirationInDays"]) != 1 {
		t.Errorf("claim-check lifecycle rule %v, want Enabled, prefix %s, 1 day", rule, s3blob.DefaultPrefix)
	}
	// A claim-checked payload must outlive every message that points to it (S3 expires objects
	// at least ExpirationInDays after creation: S3 User Guide, "Lifecycle configuration elements").
	if r := num(res("EventQueue", "MessageRetentionPeriod")); r > 86400 {
		t.Errorf("event retention %vs outlives the 1-day claim-check expiry", r)
	}
	fn := func(path ...any) any { return res("ProvisionFunction", path...) }
	if fn("Runtime") != "provided.al2023" || fmt.Sprint(fn("Architectures")) != "[arm64]" || fn("Handler") != "bootstrap" {
		t.Errorf("provision runtime %v %v %v, want provided.al2023 [arm64] bootstrap", fn("Runtime"), fn("Architectures"), fn("Handler"))
	}
	ev := fn("Events", "Events", "Properties").(map[string]any)
	if fmt.Sprint(ev["FunctionResponseTypes"]) != "[ReportBatchItemFailures]" || fmt.Sprint(samValue(t, ev["Queue"])) != "[{EventQueue}]" {
		t.Errorf("provision event source %v, want the event queue with ReportBatchItemFailures", ev)
	}
	if got := fmt.Sprint(samValue(t, fn("Environment", "Variables", "DOVETAIL_DLQ_URL"))); got != "[{EventDLQ}]" {
		t.Errorf("DOVETAIL_DLQ_URL = %s, want the event DLQ", got)
	}

	// Terraform: the same shape.
	tf := loadTF(t)
	r := func(path ...any) any { return get(t, tf, append([]any{"resource"}, path...)...) }
	for q, dlq := range map[string]string{"events": "events_dlq", "commands": "commands_dlq"} {
		want := fmt.Sprintf("${jsonencode({ deadLetterTargetArn = aws_sqs_queue.%s.arn, maxReceiveCount = %d })}", dlq, sqs.DefaultMaxReceives)
		if r("aws_sqs_queue", q, "redrive_policy") != want || r("aws_sqs_queue", q, "fifo_queue") != true || r("aws_sqs_queue", dlq, "fifo_queue") != true {
			t.Errorf("terraform queue %s: redrive %v, want %s, both FIFO", q, r("aws_sqs_queue", q, "redrive_policy"), want)
		}
	}
	lc := r("aws_s3_bucket_lifecycle_configuration", "claim_check", "rule", 0).(map[string]any)
	if b, _ := json.Marshal(lc); !strings.Contains(string(b), `"days":1`) || !strings.Contains(string(b), `"prefix":"`+s3blob.DefaultPrefix+`"`) {
		t.Errorf("terraform lifecycle rule %s, want 1 day on %s", b, s3blob.DefaultPrefix)
	}
	esm := r("aws_lambda_event_source_mapping", "provision_events").(map[string]any)
	if fmt.Sprint(esm["function_response_types"]) != "[ReportBatchItemFailures]" || esm["event_source_arn"] != "${aws_sqs_queue.events.arn}" {
		t.Errorf("terraform event source mapping %v", esm)
	}
	lf := r("aws_lambda_function", "provision").(map[string]any)
	if lf["runtime"] != "provided.al2023" || fmt.Sprint(lf["architectures"]) != "[arm64]" {
		t.Errorf("terraform function runtime %v %v", lf["runtime"], lf["architectures"])
	}
}
