package awsinfra

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/dovetail-dev/dovetail/events/notices"
	"github.com/dovetail-dev/dovetail/shared/queue/sqs"
)

// fnSpec is what the stack must give one function.
type fnSpec struct {
	name, samName, tfName string
	role, tfPolicy        string
	consumes              []string // SAM queue names of its event sources
	tfConsumes            []string // Terraform queue names, same order
	dlq                   string   // DOVETAIL_DLQ_URL (SAM)
}

var functions = []fnSpec{
	{"provision", "ProvisionFunction", "provision", "ProvisionRole", "provision", []string{"EventQueue"}, []string{"events"}, "EventDLQ"},
	{"consolidate", "ConsolidateFunction", "consolidate", "ConsolidateRole", "consolidate", []string{"ConsolidateEventQueue"}, []string{"consolidate_events"}, "ConsolidateEventDLQ"},
	{"drift", "DriftFunction", "drift", "DriftRole", "drift", []string{"DriftEventQueue"}, []string{"drift_events"}, "DriftEventDLQ"},
	{"interruption", "InterruptionFunction", "interruption", "InterruptionRole", "interruption",
		[]string{"NoticeQueue", "InterruptionEventQueue"}, []string{"notices", "interruption_events"}, "NoticeDLQ"},
}

var sqsConsume = []string{"sqs:ChangeMessageVisibility", "sqs:DeleteMessage", "sqs:GetQueueAttributes", "sqs:ReceiveMessage"}

func braces(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = "{" + n + "}"
	}
	return sorted(out)
}

// The disruption functions get no more than provision (same launch rights, for replacements),
// no launch-template deletion, tag-scoped termination, and only their own queues.
func TestFunctionRolesLeastPrivilege(t *testing.T) {
	sam := load(t, "template.yaml")
	provisionActions := map[string]bool{}
	for _, s := range samStatements(t, sam, "ProvisionRole") {
		for _, a := range s.Actions {
			provisionActions[a] = true
		}
	}
	for _, f := range functions {
		var terminate bool
		var consumed, sent []string
		for _, s := range samStatements(t, sam, f.role) {
			for _, a := range s.Actions {
				if !provisionActions[a] {
					t.Errorf("%s %s: %s is more than the provision role has", f.role, s.Sid, a)
				}
				if a == "ec2:DeleteLaunchTemplate" && f.name != "provision" {
					t.Errorf("%s %s: ec2:DeleteLaunchTemplate: the disruption functions delete no launch template", f.role, s.Sid)
				}
				if a == "sqs:SendMessage" {
					sent = append(sent, s.Resources...)
				}
			}
			if slices.Contains(s.Actions, "ec2:TerminateInstances") && slices.Contains(s.Conditions, clusterResourceTag) {
				terminate = true
			}
			if slices.Equal(s.Actions, sqsConsume) {
				consumed = append(consumed, s.Resources...)
			}
		}
		if !terminate {
			t.Errorf("%s: no ec2:TerminateInstances conditioned on %s", f.role, clusterResourceTag)
		}
		if got, want := sorted(consumed), braces(f.consumes); !slices.Equal(got, want) {
			t.Errorf("%s consumes %v, want exactly %v", f.role, got, want)
		}
		if got, want := sorted(sent), braces([]string{"CommandQueue", f.dlq}); !slices.Equal(got, want) {
			t.Errorf("%s sends to %v, want exactly %v", f.role, got, want)
		}
	}
	// The agent sends every event to each function's event queue (agent --event-queue-url).
	var agentSends []string
	for _, s := range samStatements(t, sam, "AgentRole") {
		if slices.Contains(s.Actions, "sqs:SendMessage") {
			agentSends = append(agentSends, s.Resources...)
		}
	}
	want := braces([]string{"EventQueue", "ConsolidateEventQueue", "DriftEventQueue", "InterruptionEventQueue", "CommandDLQ"})
	if got := sorted(agentSends); !slices.Equal(got, want) {
		t.Errorf("agent sends to %v, want %v", got, want)
	}
}

// Every function: the zip make package builds, partial batch responses on exactly its queues,
// its DLQ, and queues whose visibility timeout is at least 6x its timeout (AWS Lambda Developer
// Guide, "Using Lambda with Amazon SQS"), each redriving to a DLQ after sqs.DefaultMaxReceives.
func TestFunctionsQueuesAndMappings(t *testing.T) {
	sam := load(t, "template.yaml")
	tf := load(t, "main.tf.json")
	res := func(name string, path ...any) any {
		return get(t, sam, append([]any{"Resources", name, "Properties"}, path...)...)
	}
	num := func(v any) float64 { f, _ := v.(float64); return f }
	tfr := func(path ...any) any { return get(t, tf, append([]any{"resource"}, path...)...) }
	for _, f := range functions {
		fn := func(path ...any) any { return res(f.samName, path...) }
		if fn("Runtime") != "provided.al2023" || fmt.Sprint(fn("Architectures")) != "[arm64]" || fn("Handler") != "bootstrap" ||
			fn("CodeUri") != "../../dist/"+f.name+"-arm64.zip" {
			t.Errorf("%s: %v %v %v %v, want provided.al2023 [arm64] bootstrap from dist/%s-arm64.zip", f.samName,
				fn("Runtime"), fn("Architectures"), fn("Handler"), fn("CodeUri"), f.name)
		}
		timeout := num(fn("Timeout"))
		var queues []string
		for name, ev := range fn("Events").(map[string]any) {
			p := get(t, ev, "Properties").(map[string]any)
			if get(t, ev, "Type") != "SQS" || fmt.Sprint(p["FunctionResponseTypes"]) != "[ReportBatchItemFailures]" {
				t.Errorf("%s event %s: %v, want SQS with ReportBatchItemFailures", f.samName, name, ev)
			}
			queues = append(queues, samValue(t, p["Queue"])...)
		}
		if got, want := sorted(queues), braces(f.consumes); !slices.Equal(got, want) {
			t.Errorf("%s event sources %v, want %v", f.samName, got, want)
		}
		if got := fmt.Sprint(samValue(t, fn("Environment", "Variables", "DOVETAIL_DLQ_URL"))); got != "[{"+f.dlq+"}]" {
			t.Errorf("%s DOVETAIL_DLQ_URL = %s, want {%s}", f.samName, got, f.dlq)
		}
		for _, q := range f.consumes {
			if v := num(res(q, "VisibilityTimeout")); timeout <= 0 || v < 6*timeout {
				t.Errorf("%s visibility %vs, %s timeout %vs: want >= 6x", q, v, f.samName, timeout)
			}
			dlq := samValue(t, res(q, "RedrivePolicy", "deadLetterTargetArn"))
			if n := num(res(q, "RedrivePolicy", "maxReceiveCount")); n != sqs.DefaultMaxReceives || len(dlq) != 1 {
				t.Errorf("%s redrive %v after %v, want one DLQ after %d", q, dlq, n, sqs.DefaultMaxReceives)
			}
			dlqName := strings.Trim(dlq[0], "{}")
			if res(q, "FifoQueue") == true && res(dlqName, "FifoQueue") != true {
				t.Errorf("%s is FIFO but its DLQ %s is not (SQS requires a FIFO queue's DLQ to be FIFO)", q, dlqName)
			}
			if n := num(res(q, "MaximumMessageSize")); n != sqs.MaxMessageBytes {
				t.Errorf("%s MaximumMessageSize %v, want %d", q, n, sqs.MaxMessageBytes)
			}
		}
		// Terraform: the same function and mappings.
		lf := tfr("aws_lambda_function", f.tfName).(map[string]any)
		if num(lf["timeout"]) != timeout || num(lf["memory_size"]) != num(fn("MemorySize")) || lf["runtime"] != "provided.al2023" ||
			lf["filename"] != "${var.package_dir}/"+f.name+"-arm64.zip" {
			t.Errorf("terraform %s: timeout %v memory %v runtime %v file %v, want SAM's", f.tfName, lf["timeout"], lf["memory_size"], lf["runtime"], lf["filename"])
		}
		if rc, ok := fn("ReservedConcurrentExecutions").(float64); ok || lf["reserved_concurrent_executions"] != nil {
			if num(lf["reserved_concurrent_executions"]) != rc {
				t.Errorf("%s reserved concurrency SAM %v, Terraform %v", f.name, rc, lf["reserved_concurrent_executions"])
			}
		}
		var tfQueues []string
		for _, raw := range tfr("aws_lambda_event_source_mapping").(map[string]any) {
			m := raw.(map[string]any)
			if m["function_name"] == "${aws_lambda_function."+f.tfName+".arn}" {
				if fmt.Sprint(m["function_response_types"]) != "[ReportBatchItemFailures]" {
					t.Errorf("terraform mapping of %s: %v", f.tfName, m)
				}
				tfQueues = append(tfQueues, m["event_source_arn"].(string))
			}
		}
		var want []string
		for _, q := range f.tfConsumes {
			want = append(want, "${aws_sqs_queue."+q+".arn}")
		}
		if !slices.Equal(sorted(tfQueues), sorted(want)) {
			t.Errorf("terraform mappings of %s: %v, want %v", f.tfName, tfQueues, want)
		}
	}
	// The snapshot view of the interruption function lives in its execution environment: one.
	if rc := num(res("InterruptionFunction", "ReservedConcurrentExecutions")); rc != 1 {
		t.Errorf("interruption reserved concurrency %v, want 1", rc)
	}
}

var noticeRules = []string{"SpotNoticesRule", "StateChangeNoticesRule", "HealthNoticesRule"}

// match is EventBridge's pattern matching for the subset the rules use: every pattern field
// must be present in the event, leaves are lists of allowed strings, objects nest (EventBridge
// User Guide, "Event patterns").
func match(pattern, event map[string]any) bool {
	for k, p := range pattern {
		v, ok := event[k]
		if !ok {
			return false
		}
		switch pv := p.(type) {
		case map[string]any:
			ev, ok := v.(map[string]any)
			if !ok || !match(pv, ev) {
				return false
			}
		case []any:
			if !slices.Contains(pv, v) {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// The rules route exactly the notices events/notices decodes and the interruption function
// acts on to the notice queue, which only they may send to; Terraform has the same patterns.
func TestNoticeRulesAndQueuePolicy(t *testing.T) {
	sam := load(t, "template.yaml")
	tf := load(t, "main.tf.json")
	res := func(name string, path ...any) any {
		return get(t, sam, append([]any{"Resources", name, "Properties"}, path...)...)
	}
	patterns := map[string]map[string]any{}
	var detailTypes, sources []string
	for _, r := range noticeRules {
		p := res(r, "EventPattern").(map[string]any)
		patterns[r] = p
		for _, d := range p["detail-type"].([]any) {
			detailTypes = append(detailTypes, d.(string))
		}
		for _, s := range p["source"].([]any) {
			sources = append(sources, s.(string))
		}
		if got := fmt.Sprint(samValue(t, res(r, "Targets", 0, "Arn"))); got != "[{NoticeQueue}]" {
			t.Errorf("%s targets %s, want the notice queue", r, got)
		}
	}
	want := []string{notices.DetailTypeSpotInterruption, notices.DetailTypeRebalance, notices.DetailTypeStateChange,
		notices.DetailTypeCapacityReservationWarn, notices.DetailTypeHealth}
	if !slices.Equal(sorted(detailTypes), sorted(want)) {
		t.Errorf("rules route detail types %v, want the decoder's %v", detailTypes, want)
	}
	if s := slices.Compact(sorted(sources)); !slices.Equal(s, sorted([]string{notices.SourceEC2, notices.SourceHealth})) {
		t.Errorf("rule sources %v", s)
	}

	// The sample notices (events/notices/testdata/aws, recorded shapes) each match a rule iff the
	// function acts on them: not pending/running state changes (nothing to clean up), not Auto
	// Scaling lifecycle actions, not the raw SQS ReceiveMessage response.
	files, err := filepath.Glob("../../events/notices/testdata/aws/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("samples: %v %v", files, err)
	}
	var matched []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var ev map[string]any
		if err := json.Unmarshal(b, &ev); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, r := range noticeRules {
			if match(patterns[r], ev) {
				matched = append(matched, filepath.Base(f))
				break
			}
		}
	}
	wantMatched := []string{
		"aws_health_scheduled_change_dedicated_host_network_maintenance.json", "aws_health_scheduled_change_instance_reboot_maintenance.json",
		"aws_health_scheduled_change_instance_retirement.json", "ec2_capacity_reservation_instance_interruption_warning.json",
		"ec2_instance_rebalance_recommendation.json", "ec2_instance_state_change_shutting_down.json", "ec2_instance_state_change_stopped.json",
		"ec2_instance_state_change_stopping.json", "ec2_instance_state_change_terminated.json", "ec2_spot_instance_interruption_warning.json",
		"ec2_spot_instance_interruption_warning_nth_style.json", "ec2_spot_instance_interruption_warning_stop.json"}
	sort.Strings(matched)
	if !slices.Equal(matched, sorted(wantMatched)) {
		t.Errorf("samples routed: %v\nwant %v", matched, sorted(wantMatched))
	}

	// Only EventBridge, only for these rules, only SendMessage, only to the notice queue.
	st := res("NoticeQueuePolicy", "PolicyDocument", "Statement").([]any)
	if len(st) != 1 {
		t.Fatalf("notice queue policy has %d statements, want 1", len(st))
	}
	s := st[0].(map[string]any)
	cond := samValue(t, get(t, s, "Condition", "ArnEquals", "aws:SourceArn"))
	if s["Effect"] != "Allow" || fmt.Sprint(get(t, s, "Principal", "Service")) != "events.amazonaws.com" || s["Action"] != "sqs:SendMessage" ||
		fmt.Sprint(samValue(t, s["Resource"])) != "[{NoticeQueue}]" || !slices.Equal(sorted(cond), braces(noticeRules)) {
		t.Errorf("notice queue policy %v", s)
	}

	// Terraform: same patterns, targets and policy.
	tfRules := map[string]string{"SpotNoticesRule": "spot_notices", "StateChangeNoticesRule": "state_change_notices", "HealthNoticesRule": "health_notices"}
	var tfCond []string
	for _, c := range get(t, tf, "data", "aws_iam_policy_document", "notices_queue", "statement", 0, "condition", 0, "values").([]any) {
		tfCond = append(tfCond, c.(string))
	}
	for samName, tfName := range tfRules {
		var p map[string]any
		if err := json.Unmarshal([]byte(get(t, tf, "resource", "aws_cloudwatch_event_rule", tfName, "event_pattern").(string)), &p); err != nil {
			t.Fatalf("terraform %s pattern: %v", tfName, err)
		}
		if !reflect.DeepEqual(p, patterns[samName]) {
			t.Errorf("terraform %s pattern %v, SAM %v", tfName, p, patterns[samName])
		}
		if a := get(t, tf, "resource", "aws_cloudwatch_event_target", tfName, "arn"); a != "${aws_sqs_queue.notices.arn}" {
			t.Errorf("terraform %s target %v", tfName, a)
		}
		if !slices.Contains(tfCond, "${aws_cloudwatch_event_rule."+tfName+".arn}") {
			t.Errorf("terraform notice queue policy does not name rule %s: %v", tfName, tfCond)
		}
	}
	if len(tfCond) != len(tfRules) {
		t.Errorf("terraform notice queue policy names %v", tfCond)
	}
}
