package telemetry

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

var (
	launch = Audit{Action: ActionLaunch, Function: "provision", Cluster: "c1", Decision: "revision-7", Revision: 7,
		Rule: "provisioning: pending pods need new capacity", NodeClaims: []string{"default-abc12"}, PriceAfter: 0.0385}
	replace = Audit{Action: ActionReplace, Function: "consolidate", Cluster: "c1", Decision: "c-5f2e", Revision: 9,
		Rule: "consolidation/single-node", Nodes: []string{"ip-10-0-1-7.ec2.internal"}, PriceBefore: 0.192, PriceAfter: 0.0385}
)

// logLine is a's log record as a function writes it (slog JSON, no trailing newline).
func logLine(t *testing.T, a Audit) string {
	t.Helper()
	var b bytes.Buffer
	LogAudit(slog.New(slog.NewJSONHandler(&b, nil)).With("function", a.Function), a)
	return strings.TrimSuffix(b.String(), "\n")
}

// read reads in with skips collected; the records come back as JSON for comparison.
func read(t *testing.T, in string) (string, []AuditSkip) {
	t.Helper()
	var got []Audit
	var skips []AuditSkip
	err := ReadAuditStream(strings.NewReader(in), AuditReadOptions{Skipped: func(s AuditSkip) { skips = append(skips, s) }},
		func(a Audit) error { got = append(got, a); return nil })
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(got)
	return string(b), skips
}

func want(as ...Audit) string {
	b, _ := json.Marshal(as)
	return string(b)
}

// A line of 20 MiB (past the 16 MiB bufio.Scanner limit the reader had, which ended the read
// there with "token too long" and no line) is skipped by its line number; the records around it
// are read.
func TestReadAuditSkipsAnOverlongLineByNumber(t *testing.T) {
	huge := launch
	huge.Why = strings.Repeat("x", 20<<20)
	in := logLine(t, launch) + "\n" + logLine(t, huge) + "\n" + logLine(t, replace) + "\n"
	got, skips := read(t, in)
	if got != want(launch, replace) {
		t.Errorf("records %s, want launch and replace", got)
	}
	if len(skips) != 1 || skips[0].Line != 2 || !strings.Contains(skips[0].Reason, fmt.Sprint(MaxAuditLineBytes)) {
		t.Errorf("skips %+v, want line 2 longer than %d", skips, MaxAuditLineBytes)
	}
}

// A CloudWatch Logs export to S3: each line is the event's timestamp, a space and its message;
// the Lambda runtime's own lines are passed over; a last line without a newline is read.
func TestReadAuditCloudWatchExport(t *testing.T) {
	in := "2026-12-06T02:00:00.000Z START RequestId: 1b2c Version: $LATEST\n" +
		"2026-12-06T02:00:00.100Z " + logLine(t, launch) + "\n" +
		"2026-12-06T02:00:00.200Z {\"time\":\"2026-12-06T02:00:00.2Z\",\"level\":\"INFO\",\"msg\":\"provision decision\"}\n" +
		"2026-12-06T02:00:00.300Z END RequestId: 1b2c\n" +
		"2026-12-06T02:00:01.000Z " + logLine(t, replace)
	got, skips := read(t, in)
	if got != want(launch, replace) || len(skips) != 0 {
		t.Errorf("records %s skips %+v, want launch and replace, no skips", got, skips)
	}
}

// The JSON of `aws logs filter-log-events` and `aws logs get-log-events` (CloudWatch Logs API
// reference: FilterLogEvents returns events[] of logStreamName, timestamp, message,
// ingestionTime, eventId, and searchedLogStreams; GetLogEvents events[] of timestamp, message,
// ingestionTime, and nextForwardToken / nextBackwardToken), pretty-printed as the CLI does.
func TestReadAuditCloudWatchCLIJSON(t *testing.T) {
	type event struct {
		LogStreamName string `json:"logStreamName,omitempty"`
		Timestamp     int64  `json:"timestamp"`
		Message       string `json:"message"`
		IngestionTime int64  `json:"ingestionTime"`
		EventID       string `json:"eventId,omitempty"`
	}
	filter := map[string]any{
		"events": []event{
			{"2026/12/06/[$LATEST]ab", 1796522400000, "START RequestId: 1b2c Version: $LATEST\n", 1796522400010, "1"},
			{"2026/12/06/[$LATEST]ab", 1796522400100, logLine(t, launch) + "\n", 1796522400110, "2"},
			{"2026/12/06/[$LATEST]ab", 1796522401000, logLine(t, replace) + "\n", 1796522401010, "3"},
		},
		"searchedLogStreams": []map[string]any{{"logStreamName": "2026/12/06/[$LATEST]ab", "searchedCompletely": true}},
	}
	b, _ := json.MarshalIndent(filter, "", "    ")
	if got, skips := read(t, string(b)); got != want(launch, replace) || len(skips) != 0 {
		t.Errorf("filter-log-events: records %s skips %+v", got, skips)
	}
	get := fmt.Sprintf(`{
    "events": [
        {
            "timestamp": 1796522400100,
            "message": %q,
            "ingestionTime": 1796522400110
        },
        {
            "timestamp": 1796522400200,
            "message": "{\"msg\":\"decision audit\",\"audit\":{\"revision\":\"seven\"}}",
            "ingestionTime": 1796522400210
        }
    ],
    "nextForwardToken": "f/3768",
    "nextBackwardToken": "b/3767"
}`, logLine(t, launch))
	got, skips := read(t, get)
	if got != want(launch) || len(skips) != 1 || skips[0].Line != 8 || !strings.Contains(skips[0].Reason, "audit record") {
		t.Errorf("get-log-events: records %s skips %+v, want launch and the second event (line 8) skipped", got, skips)
	}
}

// A JSON array of log records or of audit records themselves (`dovetail audit -o json | jq -s`).
func TestReadAuditJSONArray(t *testing.T) {
	bare, _ := json.Marshal(replace)
	in := "[\n" + logLine(t, launch) + ",\n{\"msg\":\"other\"},\n42,\n" + string(bare) + "\n]\n"
	if got, skips := read(t, in); got != want(launch, replace) || len(skips) != 0 {
		t.Errorf("records %s skips %+v, want launch and replace", got, skips)
	}
	// An array that breaks off is an error naming the line it ends on.
	err := ReadAuditStream(strings.NewReader("[\n"+logLine(t, launch)+",\n{\"msg\": "), AuditReadOptions{}, func(Audit) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "line 3") {
		t.Errorf("broken array: %v, want an error at line 3", err)
	}
}

// A line that names the audit message but is not JSON, and a record that does not decode, are
// skips naming their lines; without Skipped the first is ReadAudit's error.
func TestReadAuditNamesWhatItSkips(t *testing.T) {
	in := logLine(t, launch) + "\n" +
		`{"msg":"decision audit","audit":{"action":"launch"` + "\n" + // cut off
		"plain text line\n" +
		`{"msg":"decision audit","audit":{"revision":"seven"}}` + "\n" +
		logLine(t, replace) + "\n"
	got, skips := read(t, in)
	if got != want(launch, replace) || len(skips) != 2 || skips[0].Line != 2 || skips[1].Line != 4 ||
		!strings.Contains(skips[0].Reason, "not JSON") || !strings.Contains(skips[1].Reason, "audit record") {
		t.Errorf("records %s skips %+v, want lines 2 (not JSON) and 4 (does not decode) skipped", got, skips)
	}
	err := ReadAudit(strings.NewReader(in), func(Audit) error { return nil })
	if err == nil || !strings.HasPrefix(err.Error(), "line 2: ") {
		t.Errorf("ReadAudit: %v, want the error of line 2", err)
	}
}
