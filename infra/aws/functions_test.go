package awsinfra

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/events/notices"
	"github.com/dovetail-dev/dovetail/functions/interruption"
	"github.com/dovetail-dev/dovetail/shared/lifecycle"
	"github.com/dovetail-dev/dovetail/shared/queue/s3blob"
	"github.com/dovetail-dev/dovetail/shared/queue/sqs"
	"github.com/dovetail-dev/dovetail/shared/runtime"
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
	{"lifecycle", "LifecycleFunction", "lifecycle", "LifecycleRole", "lifecycle", []string{"LifecycleEventQueue"}, []string{"lifecycle_events"}, "LifecycleEventDLQ"},
}

var sqsConsume = []string{"sqs:ChangeMessageVisibility", "sqs:DeleteMessage", "sqs:GetQueueAttributes", "sqs:ReceiveMessage"}

func braces(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = "{" + n + "}"
	}
	return sorted(out)
}

// The disruption and lifecycle functions get no more than provision (the disruption functions
// the same launch rights, for replacements; lifecycle none: TestLifecycleRoleLaunchesNothing), no
// launch-template deletion, tag-scoped termination, and only their own queues.
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
				if f.name == "lifecycle" && (slices.Contains(instanceProfileActions, a) || a == "iam:PassRole") {
					continue // NodeClass instance profiles: lifecycle's alone (TestLifecycleRoleLaunchesNothing)
				}
				if f.name == "interruption" && a == "sqs:GetQueueUrl" && slices.Equal(s.Resources, []string{"{NoticeQueue}"}) {
					continue // re-driving a waiting notice within seconds: its queue's URL, nothing else
				}
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
	want := braces([]string{"EventQueue", "ConsolidateEventQueue", "DriftEventQueue", "InterruptionEventQueue", "LifecycleEventQueue", "CommandDLQ"})
	if got := sorted(agentSends); !slices.Equal(got, want) {
		t.Errorf("agent sends to %v, want %v", got, want)
	}
}

// The agent's fan-out reaches every function: each FIFO queue a function consumes is one the
// agent may send to and one the outputs give the agent as an --event-queue-url (SAM: one
// <Queue>Url output each; Terraform: event_queue_urls, keyed by function name), and nothing else
// is.
func TestAgentEventQueueURLsCoverEveryFunction(t *testing.T) {
	sam := load(t, "template.yaml")
	tf := loadTF(t)
	var fifo, tfFifo []string
	for _, f := range functions {
		for i, q := range f.consumes {
			if get(t, sam, "Resources", q, "Properties", "FifoQueue") == true {
				fifo = append(fifo, "{"+q+"}")
				tfFifo = append(tfFifo, "${aws_sqs_queue."+f.tfConsumes[i]+".url}")
			}
		}
	}
	want := []string{"{EventQueue}", "{ConsolidateEventQueue}", "{DriftEventQueue}", "{InterruptionEventQueue}", "{LifecycleEventQueue}"}
	if !slices.Equal(sorted(fifo), sorted(want)) {
		t.Fatalf("functions consume the FIFO event queues %v, want %v", fifo, want)
	}
	var outputs []string
	for name, o := range get(t, sam, "Outputs").(map[string]any) {
		if strings.HasSuffix(name, "EventQueueUrl") {
			v := samValue(t, get(t, o, "Value"))
			if len(v) != 1 || v[0] != "{"+strings.TrimSuffix(name, "Url")+"}" {
				t.Errorf("output %s = %v, want Ref %s", name, v, strings.TrimSuffix(name, "Url"))
			}
			outputs = append(outputs, v...)
		}
	}
	if !slices.Equal(sorted(outputs), sorted(want)) {
		t.Errorf("SAM event queue URL outputs %v, want %v", sorted(outputs), sorted(want))
	}
	// Terraform's output is keyed by function name (the Helm chart's sqs.eventQueueURLs): each
	// function's key names the FIFO queue that function consumes, and there is no other key.
	tfURLs, ok := get(t, tf, "output", "event_queue_urls", "value").(map[string]any)
	if !ok {
		t.Fatalf("terraform event_queue_urls is %T, want an object keyed by function name", get(t, tf, "output", "event_queue_urls", "value"))
	}
	wantTF := map[string]any{}
	for _, f := range functions {
		for i, q := range f.consumes {
			if get(t, sam, "Resources", q, "Properties", "FifoQueue") == true {
				wantTF[f.name] = "${aws_sqs_queue." + f.tfConsumes[i] + ".url}"
			}
		}
	}
	if !reflect.DeepEqual(tfURLs, wantTF) {
		t.Errorf("terraform event_queue_urls %v, want %v", tfURLs, wantTF)
	}
	if len(wantTF) != len(tfFifo) {
		t.Errorf("%d functions consume %d FIFO queues: one each", len(wantTF), len(tfFifo))
	}
	var tfSends []string
	for _, s := range tfStatements(t, tf, "agent") {
		if slices.Contains(s.Actions, "sqs:SendMessage") {
			tfSends = append(tfSends, s.Resources...)
		}
	}
	if got := sorted(tfSends); !slices.Equal(got, sorted(append(slices.Clone(want), "{CommandDLQ}"))) {
		t.Errorf("terraform agent sends to %v, want %v and the command DLQ", got, want)
	}
}

// lifecycleStatements is the whole lifecycle role, in the canonical form both sources reduce
// to: its own queue and DLQ, the commands, the claim checks, termination of the cluster's
// instances, the Describe calls of NodeClass resolution (no resource-level permissions, so "*",
// in the region), the public AMI parameters, and the instance profiles of spec.role: created
// only with the cluster tag under the cluster's path, changed and deleted only with it, holding
// only the node role.
var lifecycleStatements = []statement{
	{Sid: "WriteOwnLogs", Effect: "Allow", Actions: []string{"logs:CreateLogStream", "logs:PutLogEvents"},
		Resources: []string{"arn:{partition}:logs:{region}:{account}:log-group:/aws/lambda/dovetail-{cluster}-lifecycle:*"}},
	{Sid: "ConsumeEvents", Effect: "Allow", Actions: sqsConsume, Resources: []string{"{LifecycleEventQueue}"}},
	{Sid: "SendCommandsAndDeadLetters", Effect: "Allow", Actions: []string{"sqs:SendMessage"},
		Resources: []string{"{CommandQueue}", "{LifecycleEventDLQ}"}},
	{Sid: "ClaimCheckObjects", Effect: "Allow", Actions: []string{"s3:GetObject", "s3:PutObject"},
		Resources: []string{"{bucket}/" + s3blob.DefaultPrefix + "*"}},
	{Sid: "TerminateClusterInstances", Effect: "Allow", Actions: []string{"ec2:TerminateInstances"},
		Resources: []string{"arn:{partition}:ec2:{region}:{account}:instance/*"}, Conditions: []string{clusterResourceTag}},
	{Sid: "DescribeInRegion", Effect: "Allow", Actions: []string{"ec2:DescribeCapacityReservations", "ec2:DescribeImages", "ec2:DescribeInstances", "ec2:DescribePlacementGroups", "ec2:DescribeSecurityGroups", "ec2:DescribeSubnets"},
		Resources: []string{"*"}, Conditions: []string{"StringEquals|aws:RequestedRegion|{region}"}},
	{Sid: "CreateClusterInstanceProfiles", Effect: "Allow", Actions: []string{"iam:CreateInstanceProfile", "iam:TagInstanceProfile"},
		Resources: []string{clusterProfiles}, Conditions: []string{clusterRequestTag}},
	{Sid: "ManageClusterInstanceProfiles", Effect: "Allow", Actions: []string{"iam:AddRoleToInstanceProfile", "iam:DeleteInstanceProfile", "iam:RemoveRoleFromInstanceProfile"},
		Resources: []string{clusterProfiles}, Conditions: []string{clusterResourceTag}},
	{Sid: "ReadInstanceProfiles", Effect: "Allow", Actions: []string{"iam:GetInstanceProfile", "iam:ListInstanceProfileTags", "iam:ListInstanceProfiles"},
		Resources: []string{"arn:{partition}:iam::{account}:instance-profile/*"}},
	{Sid: "PassNodeRoleToInstanceProfiles", Effect: "Allow", Actions: []string{"iam:PassRole"},
		Resources: []string{"{NodeRoleArn}"}, Conditions: []string{"StringEquals|iam:PassedToService|ec2.amazonaws.com"}},
	{Sid: "QueueAndClaimCheckKey", Effect: "Allow", Actions: []string{"kms:Decrypt", "kms:GenerateDataKey"},
		Resources: []string{"{KmsKeyArn}"}, Conditions: []string{"StringEquals|kms:ViaService|s3.{region}.amazonaws.com,sqs.{region}.amazonaws.com"}},
}

// clusterProfiles are the instance profiles the lifecycle function creates for spec.role: under
// the cluster's path (dvaws.InstanceProfilePath).
const clusterProfiles = "arn:{partition}:iam::{account}:instance-profile/dovetail/{region}/{cluster}/*"

// instanceProfileActions are the IAM writes only the lifecycle function holds.
var instanceProfileActions = []string{"iam:CreateInstanceProfile", "iam:TagInstanceProfile", "iam:AddRoleToInstanceProfile",
	"iam:DeleteInstanceProfile", "iam:RemoveRoleFromInstanceProfile", "iam:GetInstanceProfile", "iam:ListInstanceProfileTags", "iam:ListInstanceProfiles"}

// The lifecycle function launches nothing: its role is exactly lifecycleStatements in both
// sources, so no CreateFleet, RunInstances, CreateLaunchTemplate, CreateTags, launch-template
// deletion or pricing; its termination statement is drift's (and consolidate's), verbatim.
func TestLifecycleRoleLaunchesNothing(t *testing.T) {
	sam := load(t, "template.yaml")
	tf := loadTF(t)
	forbidden := []string{"ec2:CreateFleet", "ec2:RunInstances", "ec2:CreateLaunchTemplate", "ec2:DeleteLaunchTemplate",
		"ec2:CreateTags", "pricing:GetProducts"}
	for src, stmts := range map[string][]statement{"SAM LifecycleRole": samStatements(t, sam, "LifecycleRole"),
		"Terraform lifecycle": tfStatements(t, tf, "lifecycle")} {
		if len(stmts) != len(lifecycleStatements) {
			t.Errorf("%s: %d statements, want %d", src, len(stmts), len(lifecycleStatements))
		}
		for i := range min(len(stmts), len(lifecycleStatements)) {
			if got, want := stmts[i].String(), lifecycleStatements[i].String(); got != want {
				t.Errorf("%s statement %d:\n got  %s\n want %s", src, i, got, want)
			}
		}
		for _, s := range stmts {
			for _, a := range s.Actions {
				if slices.Contains(forbidden, a) {
					t.Errorf("%s %s: %s: the lifecycle function launches nothing", src, s.Sid, a)
				}
			}
		}
	}
	terminate := func(role string) string {
		for _, s := range samStatements(t, sam, role) {
			if slices.Contains(s.Actions, "ec2:TerminateInstances") {
				return s.String()
			}
		}
		return ""
	}
	for _, role := range []string{"DriftRole", "ConsolidateRole"} {
		if got, want := terminate("LifecycleRole"), terminate(role); got != want {
			t.Errorf("lifecycle termination %s, %s's %s: want the same", got, role, want)
		}
	}
}

// The lifecycle function's settings: drift's size (it decodes the same snapshot), the
// visibility timeout that goes with it, and the registration TTL, a stack parameter defaulting
// to the function's own default, passed as the flag's environment variable.
func TestLifecycleFunction(t *testing.T) {
	sam := load(t, "template.yaml")
	tf := loadTF(t)
	res := func(name string, path ...any) any {
		return get(t, sam, append([]any{"Resources", name, "Properties"}, path...)...)
	}
	tfr := func(path ...any) any { return get(t, tf, append([]any{"resource"}, path...)...) }
	num := func(v any) float64 { f, _ := v.(float64); return f }
	if m, to := num(res("LifecycleFunction", "MemorySize")), num(res("LifecycleFunction", "Timeout")); m != 1024 || to != 60 {
		t.Errorf("lifecycle %v MB %v s, want 1024 MB 60 s", m, to)
	}
	if v, tv := num(res("LifecycleEventQueue", "VisibilityTimeout")), num(tfr("aws_sqs_queue", "lifecycle_events", "visibility_timeout_seconds")); v != 360 || tv != 360 {
		t.Errorf("lifecycle event queue visibility SAM %vs Terraform %vs, want 360 s (6 x 60 s)", v, tv)
	}
	if r := num(res("LifecycleEventQueue", "MessageRetentionPeriod")); r != 86400 {
		t.Errorf("lifecycle event queue retention %vs, want 1 day (the claim-check expiry)", r)
	}
	if n := fmt.Sprint(samValue(t, res("LifecycleEventQueue", "QueueName"))); n != "[dovetail-{cluster}-lifecycle-events.fifo]" {
		t.Errorf("lifecycle event queue name %s", n)
	}
	if mapped := fmt.Sprint(res("LifecycleFunction", "Events", "Events", "Properties", "BatchSize")); mapped != "10" {
		t.Errorf("lifecycle batch size %s, want 10", mapped)
	}

	const ttlEnv = "DOVETAIL_REGISTRATION_TTL"
	if n := runtime.EnvName("registration-ttl"); n != ttlEnv {
		t.Fatalf("the function reads --registration-ttl from %s, not %s", n, ttlEnv)
	}
	def := fmt.Sprint(get(t, sam, "Parameters", "RegistrationTTL", "Default"))
	tfDef := fmt.Sprint(get(t, tf, "variable", "registration_ttl", "default"))
	if d, err := time.ParseDuration(def); err != nil || d != lifecycle.DefaultRegistrationTTL || tfDef != def {
		t.Errorf("registration TTL default SAM %q Terraform %q, want the function's %v in both", def, tfDef, lifecycle.DefaultRegistrationTTL)
	}
	// Node repair is on by default in both templates, as the function's flag; SAM's parameter
	// takes exactly the two values strconv.ParseBool reads as the flag's own spelling.
	const repairEnv = "DOVETAIL_NODE_REPAIR"
	if n := runtime.EnvName("node-repair"); n != repairEnv {
		t.Fatalf("the function reads --node-repair from %s, not %s", n, repairEnv)
	}
	if d, a := fmt.Sprint(get(t, sam, "Parameters", "NodeRepair", "Default")), fmt.Sprint(get(t, sam, "Parameters", "NodeRepair", "AllowedValues")); d != "true" || a != "[true false]" {
		t.Errorf("NodeRepair parameter default %s allowed %s, want true of [true false]", d, a)
	}
	if d, ty := fmt.Sprint(get(t, tf, "variable", "node_repair", "default")), fmt.Sprint(get(t, tf, "variable", "node_repair", "type")); d != "true" || ty != "bool" {
		t.Errorf("terraform node_repair default %s type %s, want a bool defaulting to true", d, ty)
	}
	wantEnv := map[string]string{"DOVETAIL_CLUSTER": "[{cluster}]", "DOVETAIL_CLOUD": "[aws]", "DOVETAIL_COMMAND_QUEUE_URL": "[{CommandQueue}]",
		"DOVETAIL_DLQ_URL": "[{LifecycleEventDLQ}]", "DOVETAIL_BLOB_BUCKET": "[{ClaimCheckBucket}]", "DOVETAIL_BLOB_PREFIX": "[" + s3blob.DefaultPrefix + "]",
		ttlEnv: "[{RegistrationTTL}]", "DOVETAIL_KUBERNETES_VERSION": "[{KubernetesVersion}]", repairEnv: "[{NodeRepair}]"}
	env := res("LifecycleFunction", "Environment", "Variables").(map[string]any)
	got := map[string]string{}
	for k, v := range env {
		got[k] = fmt.Sprint(samValue(t, v))
	}
	if !reflect.DeepEqual(got, wantEnv) {
		t.Errorf("lifecycle environment %v, want %v (no node-join settings: it launches nothing; the Kubernetes version resolves AMI aliases)", got, wantEnv)
	}
	tfEnv := tfr("aws_lambda_function", "lifecycle", "environment", 0, "variables").(map[string]any)
	if tfEnv[ttlEnv] != "${var.registration_ttl}" || tfEnv["DOVETAIL_DLQ_URL"] != "${aws_sqs_queue.lifecycle_events_dlq.url}" ||
		tfEnv["DOVETAIL_KUBERNETES_VERSION"] != "${var.kubernetes_version}" || tfEnv[repairEnv] != "${tostring(var.node_repair)}" {
		t.Errorf("terraform lifecycle environment %v", tfEnv)
	}
	// The parameter's pattern accepts the default and the usual spellings, refuses the rest.
	pat := regexp.MustCompile(fmt.Sprint(get(t, sam, "Parameters", "RegistrationTTL", "AllowedPattern")))
	tfCond := fmt.Sprint(get(t, tf, "variable", "registration_ttl", "validation", 0, "condition"))
	for v, ok := range map[string]bool{def: true, "20m": true, "1h30m": true, "900s": true, "15": false, "15 m": false, "": false, "-5m": false} {
		if pat.MatchString(v) != ok {
			t.Errorf("RegistrationTTL pattern %s on %q: %v, want %v", pat, v, !ok, ok)
		}
	}
	if !strings.Contains(tfCond, `regex("`+pat.String()+`", var.registration_ttl)`) {
		t.Errorf("terraform registration_ttl validation %s, want SAM's pattern %s", tfCond, pat)
	}
}

// Every function: the zip make package builds, partial batch responses on exactly its queues,
// its DLQ, and queues whose visibility timeout is at least 6x its timeout (AWS Lambda Developer
// Guide, "Using Lambda with Amazon SQS"), each redriving to a DLQ after sqs.DefaultMaxReceives.
func TestFunctionsQueuesAndMappings(t *testing.T) {
	sam := load(t, "template.yaml")
	tf := loadTF(t)
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
			if n := num(res(q, "RedrivePolicy", "maxReceiveCount")); n != float64(maxReceives(q)) || len(dlq) != 1 {
				t.Errorf("%s redrive %v after %v, want one DLQ after %d", q, dlq, n, maxReceives(q))
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
			lf["filename"] != "${local.package_dir}/"+f.name+"-arm64.zip" {
			t.Errorf("terraform %s: timeout %v memory %v runtime %v file %v, want SAM's", f.tfName, lf["timeout"], lf["memory_size"], lf["runtime"], lf["filename"])
		}
		if rc, ok := fn("ReservedConcurrentExecutions").(float64); ok || lf["reserved_concurrent_executions"] != nil {
			if num(lf["reserved_concurrent_executions"]) != rc {
				t.Errorf("%s reserved concurrency SAM %v, Terraform %v", f.name, rc, lf["reserved_concurrent_executions"])
			}
		}
		if got, want := lf["environment"].([]any)[0].(map[string]any)["variables"].(map[string]any)["DOVETAIL_DLQ_URL"],
			"${aws_sqs_queue."+f.tfConsumes[0]+"_dlq.url}"; got != want {
			t.Errorf("terraform %s DOVETAIL_DLQ_URL = %v, want %s", f.tfName, got, want)
		}
		var samEnv, tfEnv []string
		for k := range fn("Environment", "Variables").(map[string]any) {
			samEnv = append(samEnv, k)
		}
		for k := range get(t, sam, "Globals", "Function", "Environment", "Variables").(map[string]any) {
			samEnv = append(samEnv, k) // the governance settings, every function's
		}
		for k := range lf["environment"].([]any)[0].(map[string]any)["variables"].(map[string]any) {
			tfEnv = append(tfEnv, k)
		}
		if !slices.Equal(sorted(samEnv), sorted(tfEnv)) {
			t.Errorf("%s environment SAM %v, Terraform %v", f.name, sorted(samEnv), sorted(tfEnv))
		}
		for i, q := range f.consumes {
			tq := tfr("aws_sqs_queue", f.tfConsumes[i]).(map[string]any)
			if num(tq["visibility_timeout_seconds"]) != num(res(q, "VisibilityTimeout")) ||
				num(tq["message_retention_seconds"]) != num(res(q, "MessageRetentionPeriod")) ||
				num(tq["max_message_size"]) != num(res(q, "MaximumMessageSize")) || (tq["fifo_queue"] == true) != (res(q, "FifoQueue") == true) {
				t.Errorf("terraform queue %s %v differs from SAM %s", f.tfConsumes[i], tq, q)
			}
			want := fmt.Sprintf("${jsonencode({ deadLetterTargetArn = aws_sqs_queue.%s_dlq.arn, maxReceiveCount = %d })}", f.tfConsumes[i], maxReceives(q))
			if tq["redrive_policy"] != want {
				t.Errorf("terraform queue %s redrive %v, want %s", f.tfConsumes[i], tq["redrive_policy"], want)
			}
			if dlq := tfr("aws_sqs_queue", f.tfConsumes[i]+"_dlq"); dlq == nil || (tq["fifo_queue"] == true && get(t, dlq, "fifo_queue") != true) {
				t.Errorf("terraform queue %s: DLQ %v missing or not FIFO", f.tfConsumes[i], dlq)
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
	// The interruption function keeps nothing between invocations (its snapshot is read from the
	// claim-check bucket): any number of execution environments decide alike.
	if rc := res("InterruptionFunction", "ReservedConcurrentExecutions"); rc != nil || tfr("aws_lambda_function", "interruption").(map[string]any)["reserved_concurrent_executions"] != nil {
		t.Errorf("interruption reserved concurrency %v: want none (stateless)", rc)
	}
}

// maxReceives is the redrive policy's maxReceiveCount a function's queue needs: the transport's
// limit, or for the notice queue interruption.MaxDeliveries (a waiting notice is re-driven every
// few seconds until its drain).
func maxReceives(queue string) int {
	if queue == "NoticeQueue" {
		return interruption.MaxDeliveries
	}
	return sqs.DefaultMaxReceives
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
	tf := loadTF(t)
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
		if err := json.Unmarshal([]byte(tfEvalString(t, get(t, tf, "resource", "aws_cloudwatch_event_rule", tfName, "event_pattern"))), &p); err != nil {
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

// The interruption function reads the cluster's latest snapshot where the agent writes it (the
// claim-check prefix, events.LatestSnapshotKey): the agent may put it, the interruption role get
// it, SAM and Terraform alike.
func TestLatestSnapshotKeyIsReadableAndWritable(t *testing.T) {
	sam := load(t, "template.yaml")
	key := "{bucket}/" + s3blob.DefaultPrefix + events.LatestSnapshotKey("{cluster}")
	for role, action := range map[string]string{"AgentRole": "s3:PutObject", "InterruptionRole": "s3:GetObject"} {
		ok := false
		for _, s := range samStatements(t, sam, role) {
			if s.Effect != "Allow" || !slices.Contains(s.Actions, action) {
				continue
			}
			for _, r := range s.Resources {
				// IAM's wildcard: * matches any characters, "/" included.
				if regexp.MustCompile("^" + strings.ReplaceAll(regexp.QuoteMeta(r), `\*`, ".*") + "$").MatchString(key) {
					ok = true
				}
			}
		}
		if !ok {
			t.Errorf("%s: no %s on %s", role, action, key)
		}
	}
}
