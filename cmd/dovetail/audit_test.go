package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	qnats "github.com/dovetail-dev/dovetail/shared/queue/nats"
	"github.com/dovetail-dev/dovetail/shared/queue/nats/natsauth"
	"github.com/dovetail-dev/dovetail/shared/queue/nats/natsembed"
	"github.com/dovetail-dev/dovetail/shared/telemetry"
)

// TestAuditFromNATS: the decision audit records a function logs through the NATS runtime's
// logger (telemetry.AuditHandler publishing with qnats.PublishAudit) are read back by `dovetail
// audit --nats URL --cluster C` from a real embedded JetStream server: each once (a record logged
// twice, as a redelivered decision does, is stored once), in order, with every field; other log
// records are not published; the log stream still has every record.
func TestAuditFromNATS(t *testing.T) {
	srv, url, err := natsembed.Run(natsembed.Options{Cluster: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	nc, err := qnats.Connect(url, "audit-test", srv.AdminOptions()...)
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

	files, err := srv.WriteClientFiles(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	// Without credentials the command refuses to start, naming the flags.
	if code, _, stderr := runCLI(t, "audit", "--nats", url, "--cluster", "c1"); code == 0 || !strings.Contains(stderr, "--nats-creds or --nats-nkey-seed: required") {
		t.Errorf("audit without credentials: exit %d, stderr %q", code, stderr)
	}
	code, out, stderr := runCLI(t, "audit", "--nats", url, "--cluster", "c1", "-o", "json",
		"--nats-nkey-seed", files.Seeds[natsauth.RoleAudit], "--nats-tls-ca", files.CA)
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

	creds := []string{"--nats-nkey-seed", files.Seeds[natsauth.RoleAudit], "--nats-tls-ca", files.CA}
	code, out, stderr = runCLI(t, append([]string{"audit", "--nats", url, "--cluster", "c1"}, creds...)...)
	if code != 0 || !strings.Contains(out, "consolidation/single-node") || !strings.Contains(out, "0.3840 (1 × m5.2xlarge)") ||
		strings.Count(out, "\n") != 1+2+1 { // header, two rows, one Why line
		t.Errorf("table (exit %d, stderr %s):\n%s", code, stderr, out)
	}
	// Another cluster's records (c1's audit credentials), and flags that do not go together.
	if code, _, stderr := runCLI(t, append([]string{"audit", "--nats", url, "--cluster", "nope"}, creds...)...); code == 0 || !strings.Contains(stderr, "dovetail.nope.audit") {
		t.Errorf("other cluster: exit %d, stderr %q; want an error naming its subject", code, stderr)
	}
	if code, _, stderr := runCLI(t, "audit", "--follow", "x.log"); code == 0 || !strings.Contains(stderr, "--follow") {
		t.Errorf("--follow without --nats: exit %d, stderr %q", code, stderr)
	}
}

// `dovetail audit FILE` on a log with a 20 MiB line (past the 16 MiB the reader stopped at,
// silently and without a line number) and on a CloudWatch Logs export: every record around the
// long line is printed, and the long line is named on stderr.
func TestAuditFilesLongLineAndCloudWatchExport(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	launch := telemetry.Audit{Action: telemetry.ActionLaunch, Function: "provision", Cluster: "c1", Decision: "revision-7",
		Rule: "provisioning: pending pods need new capacity", PriceAfter: 0.0385}
	huge := launch
	huge.Why = strings.Repeat("y", 20<<20)
	drain := telemetry.Audit{Action: telemetry.ActionDrain, Function: "interruption", Cluster: "c1", Decision: "n-1",
		Rule: "interruption: SpotInterruption", Nodes: []string{"ip-10-0-1-7.ec2.internal"}}
	for _, a := range []telemetry.Audit{launch, huge, drain} {
		telemetry.LogAudit(log, a)
	}
	dir := t.TempDir()
	long := filepath.Join(dir, "long.log")
	if err := os.WriteFile(long, logs.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := runCLI(t, "audit", "-o", "json", long)
	if code != 0 || strings.Count(out, "\n") != 2 || !strings.Contains(out, `"rule":"interruption: SpotInterruption"`) {
		t.Errorf("exit %d, stdout:\n%s\nwant the two records around the long line", code, out)
	}
	if !strings.Contains(stderr, long+": line 2 skipped") || !strings.Contains(stderr, "1 line(s) skipped") {
		t.Errorf("stderr %q, want line 2 named and a count", stderr)
	}

	var export strings.Builder
	for i, line := range strings.Split(strings.TrimSuffix(logs.String(), "\n"), "\n") {
		if i == 1 {
			continue
		}
		fmt.Fprintf(&export, "2026-12-06T02:00:0%d.000Z %s\n", i, line)
	}
	cw := filepath.Join(dir, "000000")
	if err := os.WriteFile(cw, []byte("2026-12-06T01:59:59.000Z START RequestId: 1b2c Version: $LATEST\n"+export.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, stderr = runCLI(t, "audit", cw)
	if code != 0 || stderr != "" || !strings.Contains(out, "provisioning: pending pods need new capacity") ||
		!strings.Contains(out, "ip-10-0-1-7.ec2.internal") || strings.Count(out, "\n") != 3 { // header and two rows
		t.Errorf("CloudWatch export: exit %d stderr %q, table:\n%s", code, stderr, out)
	}
}
