package telemetry

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
)

// MaxAuditLineBytes bounds one log line (or one element of a JSON log document) the audit
// reader holds: a record is a few KiB, and CloudWatch Logs keeps events of at most 1 MiB
// (CloudWatch Logs quotas, "Event size"), so a longer line is no record Dovetail wrote. It is
// skipped with a warning naming its line, read in pieces without holding it.
const MaxAuditLineBytes = 8 << 20

// AuditSkip is something the audit reader could not read: the 1-based line it starts on and
// why. Lines that are not audit records (other log lines) are not skips.
type AuditSkip struct {
	Line   int
	Reason string
}

func (s AuditSkip) Error() string { return fmt.Sprintf("line %d: %s", s.Line, s.Reason) }

// AuditReadOptions configures ReadAuditStream.
type AuditReadOptions struct {
	// MaxLineBytes bounds a line or a JSON element; default MaxAuditLineBytes.
	MaxLineBytes int
	// Skipped is told of each skip, and reading goes on; nil: the first skip is the error.
	Skipped func(AuditSkip)
}

// The formats ReadAuditStream recognises from the start of the input.
var (
	// A JSON document of `aws logs filter-log-events` or `aws logs get-log-events` (CloudWatch
	// Logs API reference, FilterLogEvents and GetLogEvents responses: events[] with message,
	// beside searchedLogStreams, nextToken, nextForwardToken and nextBackwardToken).
	cloudWatchDocument = regexp.MustCompile(`^\s*\{\s*"(events|searchedLogStreams|nextToken|nextForwardToken|nextBackwardToken)"\s*:`)
	jsonArray          = regexp.MustCompile(`^\s*\[`)
)

// ReadAuditStream reads the decision audit records of a log and hands each to each, in order,
// holding one line (or one JSON element) at a time. It reads:
//   - JSON lines, as the functions log them (slog JSON: kubectl logs, `dovetail dev -v`);
//   - CloudWatch Logs exports to S3, whose lines are the event's timestamp, a space and its
//     message (CloudWatch Logs User Guide, "Exporting log data to Amazon S3");
//   - the JSON output of `aws logs filter-log-events` / `get-log-events` (events[].message);
//   - a JSON array whose elements are log records or audit records themselves (`dovetail audit
//     -o json | jq -s`).
//
// Other log lines are passed over. A line longer than MaxLineBytes, a line that names the audit
// message but is not JSON, and a record that does not decode are skips (o.Skipped). A JSON
// document that breaks off is an error naming the line.
func ReadAuditStream(r io.Reader, o AuditReadOptions, each func(Audit) error) error {
	if o.MaxLineBytes <= 0 {
		o.MaxLineBytes = MaxAuditLineBytes
	}
	skip := func(s AuditSkip) error {
		if o.Skipped == nil {
			return s
		}
		o.Skipped(s)
		return nil
	}
	br := bufio.NewReaderSize(r, 64<<10)
	// Enough to see past the blank space before the first key; a short input peeks what there
	// is (its error comes back from the first read below).
	head, _ := br.Peek(256)
	switch {
	case cloudWatchDocument.Match(head):
		return readAuditDocument(br, o.MaxLineBytes, skip, each, true)
	case jsonArray.Match(head):
		return readAuditDocument(br, o.MaxLineBytes, skip, each, false)
	}
	return readAuditLines(br, o.MaxLineBytes, skip, each)
}

func readAuditLines(br *bufio.Reader, max int, skip func(AuditSkip) error, each func(Audit) error) error {
	var buf []byte
	for n := 1; ; n++ {
		line, size, err := readLine(br, max, buf[:0])
		buf = line
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("line %d: %w", n, err)
		}
		if size > max {
			if serr := skip(AuditSkip{n, fmt.Sprintf("%d bytes, longer than the %d a record may have: not read", size, max)}); serr != nil {
				return serr
			}
		} else if serr := auditFromLine(bytes.TrimSpace(line), n, skip, each); serr != nil {
			return serr
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
	}
}

// readLine reads up to and without the next '\n' into buf, keeping at most max bytes of it;
// size is the line's whole length. err is io.EOF at the end of the input.
func readLine(br *bufio.Reader, max int, buf []byte) (line []byte, size int, err error) {
	for {
		chunk, err := br.ReadSlice('\n')
		size += len(chunk)
		if len(buf)+len(chunk) <= max+1 { // +1: the '\n' itself
			buf = append(buf, chunk...)
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err != nil:
			if size == 0 {
				return buf, 0, err
			}
			return buf, size, io.EOF
		}
		return bytes.TrimSuffix(buf, []byte("\n")), size - 1, nil
	}
}

// auditFromLine reads one line: a JSON log record, or a CloudWatch export's "<timestamp>
// <message>".
func auditFromLine(line []byte, n int, skip func(AuditSkip) error, each func(Audit) error) error {
	if len(line) == 0 {
		return nil
	}
	if line[0] != '{' {
		i := bytes.IndexByte(line, ' ')
		if i < 0 {
			return nil
		}
		line = bytes.TrimSpace(line[i+1:])
	}
	return auditFromRecord(line, n, skip, each)
}

// auditFromRecord reads one log record (a JSON object); one that is not an audit record is
// passed over.
func auditFromRecord(rec []byte, n int, skip func(AuditSkip) error, each func(Audit) error) error {
	if !bytes.Contains(rec, []byte(AuditMessage)) {
		return nil // not an audit record (nor one that a JSON error could hide)
	}
	a, ok, err := ParseAuditLine(rec)
	if err != nil {
		return skip(AuditSkip{n, err.Error()})
	}
	if !ok {
		var probe struct {
			Msg string `json:"msg"`
		}
		if jerr := json.Unmarshal(rec, &probe); jerr != nil {
			return skip(AuditSkip{n, "names the audit message but is not JSON: " + jerr.Error()})
		}
		return nil
	}
	return each(a)
}

// readAuditDocument walks a JSON document one element at a time: the events[] of a CloudWatch
// Logs response (cloudWatch), or a top-level array.
func readAuditDocument(br *bufio.Reader, max int, skip func(AuditSkip) error, each func(Audit) error, cloudWatch bool) error {
	lc := &lineCounter{r: br, max: max}
	dec := json.NewDecoder(lc)
	fail := func(err error) error {
		return fmt.Errorf("line %d: %w", lc.line(dec.InputOffset()), err)
	}
	tok, err := dec.Token()
	if err != nil {
		return fail(err)
	}
	if want := json.Delim('['); cloudWatch && tok != json.Delim('{') || !cloudWatch && tok != want {
		return fail(fmt.Errorf("document starts with %v, want %s", tok, map[bool]string{true: "an object", false: "an array"}[cloudWatch]))
	}
	if cloudWatch {
		for dec.More() {
			key, err := dec.Token()
			if err != nil {
				return fail(err)
			}
			if key != "events" {
				lc.consumed = dec.InputOffset()
				var skipped json.RawMessage // a token or a list of stream names: bounded by max
				if err := dec.Decode(&skipped); err != nil {
					return fail(err)
				}
				continue
			}
			if tok, err = dec.Token(); err != nil {
				return fail(err)
			}
			if tok != json.Delim('[') {
				return fail(fmt.Errorf("events: %v, want an array", tok))
			}
			if err := eachElement(dec, lc, skip, each, true); err != nil {
				return err
			}
		}
		return nil
	}
	return eachElement(dec, lc, skip, each, false)
}

// eachElement decodes the elements of the array dec stands in, one at a time, then its ']'.
func eachElement(dec *json.Decoder, lc *lineCounter, skip func(AuditSkip) error, each func(Audit) error, events bool) error {
	for dec.More() {
		lc.consumed = dec.InputOffset()
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) {
				return fmt.Errorf("line %d: the JSON document breaks off: %w", lc.line(lc.read), err)
			}
			return fmt.Errorf("after line %d: %w", lc.line(lc.consumed), err)
		}
		n := lc.line(dec.InputOffset() - int64(len(raw))) // where the element starts
		if events {
			var ev struct {
				Message *string `json:"message"`
			}
			if err := json.Unmarshal(raw, &ev); err != nil || ev.Message == nil {
				if serr := skip(AuditSkip{n, "a CloudWatch Logs event without a message string"}); serr != nil {
					return serr
				}
				continue
			}
			if err := auditFromRecord(bytes.TrimSpace([]byte(*ev.Message)), n, skip, each); err != nil {
				return err
			}
			continue
		}
		if err := auditFromElement(raw, n, skip, each); err != nil {
			return err
		}
	}
	_, err := dec.Token() // ']'
	if err != nil {
		return fmt.Errorf("line %d: %w", lc.line(dec.InputOffset()), err)
	}
	return nil
}

// auditFromElement reads an element of a JSON array: a log record (with msg) or an audit
// record as `dovetail audit -o json` prints it (action, function, decision, rule).
func auditFromElement(raw json.RawMessage, n int, skip func(AuditSkip) error, each func(Audit) error) error {
	var probe struct {
		Msg    *string `json:"msg"`
		Action string  `json:"action"`
		Rule   string  `json:"rule"`
	}
	if err := json.Unmarshal(raw, &probe); err != nil {
		return nil // a number, a string: not a record
	}
	if probe.Msg != nil {
		return auditFromRecord(raw, n, skip, each)
	}
	if probe.Action == "" || probe.Rule == "" {
		return nil
	}
	var a Audit
	if err := json.Unmarshal(raw, &a); err != nil {
		return skip(AuditSkip{n, "audit record: " + err.Error()})
	}
	return each(a)
}

// lineCounter counts the lines of what a json.Decoder reads, so a position (InputOffset) can be
// named by its line; it keeps only the newlines the decoder has read ahead, and refuses to let
// one element grow past max unread bytes (the decoder would hold it whole).
type lineCounter struct {
	r        io.Reader
	max      int
	read     int64   // bytes read
	consumed int64   // where the element being decoded starts
	newlines []int64 // offsets of newlines at or past the last line asked for
	before   int     // newlines before those
}

func (c *lineCounter) Read(p []byte) (int, error) {
	if c.read-c.consumed > int64(c.max) {
		return 0, fmt.Errorf("an element longer than %d bytes: no record Dovetail wrote", c.max)
	}
	n, err := c.r.Read(p)
	for i, b := range p[:n] {
		if b == '\n' {
			c.newlines = append(c.newlines, c.read+int64(i))
		}
	}
	c.read += int64(n)
	return n, err
}

// line is the 1-based line of offset; offsets asked for never decrease.
func (c *lineCounter) line(offset int64) int {
	i := 0
	for i < len(c.newlines) && c.newlines[i] < offset {
		i++
	}
	c.before += i
	c.newlines = append(c.newlines[:0], c.newlines[i:]...)
	return c.before + 1
}
