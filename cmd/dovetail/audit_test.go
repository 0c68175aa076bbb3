package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	qnats "github.com/dovetail-dev/dovetail/shared/queue/nats"
	"github.com/dovetail-dev/dovetail/shared/queue/nats/natsembed"
	"github.com/dovetail-dev/dovetail/shared/telemetry"
)

// TestAuditFromNATS: the decision audit records a function logs through the NATS runtime's
// logger (telemetry.AuditHandler publishing with qnats.PublishAudit) are read back by `dovetail
// audit --nats URL --cluster C` from a real embedded JetStream server: each once (a record logged
// twice, as a redelivered decision does, is stored once), in order, with every field; other log
// records are not published; the log stream still has every record.
func TestAuditFromNATS(t *testing.T) {
	srv, url, err := natsembed.Run(natsembed.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	nc, err := qnats.Connect(url, "audit-test")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ctx := context.Background()
	if _, err := qnats.EnsureStream(ctx, nc, qnats.StreamConfig{Cluster: "c1", Memory: true}); err != nil {
		t.Fatal(err)
	}
	pub, err := qnats.NewPublisher(nc)
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	var pubErrs []error
	log := slog.New(telemetry.AuditHandler{Next: slog.NewJSONHandler(&logs, nil),
		Publish: qnats.PublishAudit(pub, "c1", func(err error) { pubErrs = append(pubErrs, err) })}).With("function", "provision")
	launch := telemetry.Audit{Action: telemetry.ActionLaunch, Function: "provision", Cluster: "c1", Decision: "revision-7", Revision: 7,
		Rule: "provisioning: pending pods need new capacity", Why: "2 pending pods fit no existing node", Inputs: []string{"pending pod default/web-0", "pending pod default/web-1"},
		NodeClaims: []string{"default-abc12 (m6g.large/us-east-1a/spot)"}, PriceBefore: 0, PriceAfter: 0.0385, LowerBound: 0.0385,
		StaticBaseline: &telemetry.StaticBaseline{InstanceType: "m5.2xlarge", Nodes: 1, PricePerHour: 0.384}}
	drain := telemetry.Audit{Action: telemetry.ActionReplace, Function: "consolidate", Cluster: "c1", Decision: "c-5f2e", Revision: 9,
		Rule: "consolidation/single-node", Nodes: []string{"ip-10-0-1-7.ec2.internal"}, PriceBefore: 0.192, PriceAfter: 0.0385}
	telemetry.LogAudit(log, launch)
	log.Info("provision decision", "launched", 1) // not an audit record
	telemetry.LogAudit(log, launch)               // the decision redelivered
	telemetry.LogAudit(log, drain)
	if len(pubErrs) > 0 {
		t.Fatalf("publish errors: %v", pubErrs)
	}
	if n := strings.Count(logs.String(), `"msg":"decision audit"`); n != 3 {
		t.Fatalf("%d audit records in the log stream, want 3 (the log keeps every one)", n)
	}

	code, out, stderr := runCLI(t, "audit", "--nats", url, "--cluster", "c1", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var got []telemetry.Audit
	dec := json.NewDecoder(strings.NewReader(out))
	for dec.More() {
		var a telemetry.Audit
		if err := dec.Decode(&a); err != nil {
			t.Fatal(err)
		}
		got = append(got, a)
	}
	wantJSON, _ := json.Marshal([]telemetry.Audit{launch, drain})
	gotJSON, _ := json.Marshal(got)
	if string(gotJSON) != string(wantJSON) {
		t.Fatalf("records read from NATS:\n%s\nwant:\n%s", gotJSON, wantJSON)
	}

	code, out, stderr = runCLI(t, "audit", "--nats", url, "--cluster", "c1")
	if code != 0 || !strings.Contains(out, "consolidation/single-node") || !strings.Contains(out, "0.3840 (1 × m5.2xlarge)") ||
		strings.Count(out, "\n") != 1+2+1 { // header, two rows, one Why line
		t.Errorf("table (exit %d, stderr %s):\n%s", code, stderr, out)
	}
	// A cluster with no stream, and flags that do not go together.
	if code, _, stderr := runCLI(t, "audit", "--nats", url, "--cluster", "nope"); code == 0 || !strings.Contains(stderr, "dovetail-nope") {
		t.Errorf("unknown cluster: exit %d, stderr %q; want an error naming its stream", code, stderr)
	}
	if code, _, stderr := runCLI(t, "audit", "--follow", "x.log"); code == 0 || !strings.Contains(stderr, "--follow") {
		t.Errorf("--follow without --nats: exit %d, stderr %q", code, stderr)
	}
}
