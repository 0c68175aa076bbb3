package events_test

// Peak memory of decoding hostile inputs of at most 1 MiB, measured as the maximum resident set
// of a child process (the test binary re-run for one case), so nothing else of the test run is
// counted and every allocation the decoder makes is. Each input is written to a file by the
// parent; the child reads it, decodes it through the public entry (events.Decode and the Codec,
// notices.Decode, manifests.LoadReader) and prints the outcome.

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/events/notices"
	"github.com/dovetail-dev/dovetail/shared/manifests"
)

// maxPeakRSS is the bound the issue sets: peak memory for any input of at most 1 MiB.
const maxPeakRSS = 256 << 20

const maxInput = 1 << 20

// hostile is one input: how to make it, and which decoder reads it.
type hostile struct {
	name  string
	entry string // "event", "snapshot", "command", "notice", "manifest", "claimcheck"
	make  func() []byte
	// want is "refused" (the default), "decoded" (a legitimate input) or "bounded" (within
	// the limits: it may decode, its memory is what is checked).
	want string
}

const snapHead = `{"schemaVersion":1,"cluster":"prod","revision":1,"time":"2026-03-01T12:00:00Z",`

// zst compresses what gen writes, at the best level (as an attacker would), streaming.
func zst(gen func(w io.Writer)) []byte {
	var b bytes.Buffer
	w, _ := zstd.NewWriter(&b, zstd.WithEncoderLevel(zstd.SpeedBestCompression))
	gen(w)
	w.Close()
	return b.Bytes()
}

func repeat(w io.Writer, s string, n int) {
	chunk := []byte(strings.Repeat(s, 4096))
	for ; n >= 4096; n -= 4096 {
		w.Write(chunk)
	}
	w.Write(chunk[:n*len(s)])
}

// untilCompressed writes elements made by elem until the compressed output nears limit bytes.
func untilCompressed(head, sep, tail string, elem func(i int) string, limit int) []byte {
	var b bytes.Buffer
	w, _ := zstd.NewWriter(&b, zstd.WithEncoderLevel(zstd.SpeedDefault))
	io.WriteString(w, head)
	for i := 0; b.Len() < limit-64<<10; i++ {
		if i > 0 {
			io.WriteString(w, sep)
		}
		io.WriteString(w, elem(i))
		if i%4096 == 0 {
			w.Flush()
		}
	}
	io.WriteString(w, tail)
	w.Close()
	return b.Bytes()
}

func randName(r *rand.Rand, n int) string {
	const alpha = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	for i := range b {
		b[i] = alpha[r.IntN(len(alpha))]
	}
	return string(b)
}

func hostileInputs() []hostile {
	r := rand.New(rand.NewPCG(7, 7))
	return []hostile{
		{name: "zstd bomb: 2,000,000 empty pods (the issue's 735-byte event)", entry: "event", make: func() []byte {
			return zst(func(w io.Writer) {
				io.WriteString(w, snapHead+`"pods":[{}`)
				repeat(w, `,{}`, 2_000_000-1)
				io.WriteString(w, `]}`)
			})
		}},
		{name: "18-byte frame declaring 512 MiB", entry: "snapshot", make: func() []byte {
			return []byte{0x28, 0xb5, 0x2f, 0xfd, 0xe0, 0, 0, 0, 0x20, 0, 0, 0, 0, 0x01, 0, 0}
		}},
		{name: "empty-node flood, 1,000,000 nodes", entry: "snapshot", make: func() []byte {
			return zst(func(w io.Writer) {
				io.WriteString(w, snapHead+`"nodes":[{}`)
				repeat(w, `,{}`, 999_999)
				io.WriteString(w, `]}`)
			})
		}},
		{name: "pods with random names up to 1 MiB compressed", entry: "snapshot", make: func() []byte {
			return untilCompressed(snapHead+`"pods":[`, ",", "]}", func(int) string {
				return `{"metadata":{"name":"` + randName(r, 6) + `","namespace":"a"},"spec":{"nodeName":"n"}}`
			}, maxInput)
		}},
		{name: "pods with 14-char random names: 1 MiB at the object budget", entry: "snapshot", want: "bounded", make: func() []byte {
			return untilCompressed(snapHead+`"pods":[`, ",", "]}", func(int) string {
				return `{"metadata":{"name":"` + randName(r, 14) + `","namespace":"a"},"spec":{"nodeName":"n"}}`
			}, maxInput)
		}},
		{name: "one pod with 2,000,000 empty containers", entry: "snapshot", make: func() []byte {
			return zst(func(w io.Writer) {
				io.WriteString(w, snapHead+`"pods":[{"spec":{"containers":[{}`)
				repeat(w, `,{}`, 1_999_999)
				io.WriteString(w, `]}}]}`)
			})
		}},
		{name: "nested arrays: pods × containers × ports", entry: "snapshot", make: func() []byte {
			ports := `{"ports":[{}` + strings.Repeat(`,{}`, 999) + `]}`
			pod := `{"spec":{"containers":[` + ports + strings.Repeat(","+ports, 99) + `]}}`
			return zst(func(w io.Writer) {
				io.WriteString(w, snapHead+`"pods":[`+pod)
				repeat(w, ","+pod, 999)
				io.WriteString(w, `]}`)
			})
		}},
		{name: "labels map flood with random keys", entry: "snapshot", want: "bounded", make: func() []byte {
			return untilCompressed(snapHead+`"nodes":[{"metadata":{"name":"n","labels":{`, ",", `}}}]}`, func(int) string {
				return `"` + randName(r, 8) + `":""`
			}, maxInput)
		}},
		{name: "deep nesting: 4,000,000 brackets", entry: "snapshot", make: func() []byte {
			return zst(func(w io.Writer) {
				io.WriteString(w, snapHead+`"x":`)
				repeat(w, "[", 4_000_000)
				repeat(w, "]", 4_000_000)
				io.WriteString(w, `}`)
			})
		}},
		{name: "huge string: a 1 GiB node name", entry: "snapshot", make: func() []byte {
			return zst(func(w io.Writer) {
				io.WriteString(w, snapHead+`"nodes":[{"metadata":{"name":"`)
				repeat(w, "a", 1<<30)
				io.WriteString(w, `"}}]}`)
			})
		}},
		{name: "command with 2,000,000 empty pod refs", entry: "command", make: func() []byte {
			return zst(func(w io.Writer) {
				io.WriteString(w, `{"id":"c","kind":"NominatePods","cluster":"prod","nodeName":"n","pods":[{}`)
				repeat(w, `,{}`, 1_999_999)
				io.WriteString(w, `]}`)
			})
		}},
		{name: "claim-checked blob bomb (2,000,000 empty pods)", entry: "claimcheck", make: func() []byte {
			return zst(func(w io.Writer) {
				io.WriteString(w, snapHead+`"pods":[{}`)
				repeat(w, `,{}`, 1_999_999)
				io.WriteString(w, `]}`)
			})
		}},
		{name: "1 MiB envelope of base64 junk", entry: "event", make: func() []byte {
			junk := make([]byte, maxInput*3/4-1024)
			for i := range junk {
				junk[i] = byte(r.Uint32())
			}
			return junk
		}},
		{name: "1 MiB notice: SQS response of empty messages", entry: "notice", make: func() []byte {
			return []byte(`{"Messages":[{}` + strings.Repeat(`,{}`, maxInput/3-10) + `]}`)
		}},
		{name: "1 MiB notice nested 500,000 deep", entry: "notice", make: func() []byte {
			return []byte(`{"detail-type":` + strings.Repeat("[", maxInput/2-20) + strings.Repeat("]", maxInput/2-20) + `}`)
		}},
		{name: "1 MiB manifest: a Deployment with 250,000 empty containers", entry: "manifest", make: func() []byte {
			return []byte("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  template:\n    spec:\n      containers: [{}" +
				strings.Repeat(", {}", maxInput/4-100) + "]\n")
		}},
		{name: "legitimate snapshot: 30,000 pods of one Deployment", entry: "snapshot", want: "decoded", make: func() []byte {
			return legitimate(30000)
		}},
	}
}

// legitimate encodes a snapshot of one Deployment's pods spread over nodes (the most repetitive
// real shape: it compresses 22:1) with the package's own encoder.
func legitimate(pods int) []byte {
	var b strings.Builder
	b.WriteString(snapHead + `"nodes":[`)
	for n := range pods / 30 {
		if n > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"metadata":{"name":"ip-10-0-%d-%d.ec2.internal","labels":{"karpenter.sh/nodepool":"default","node.kubernetes.io/instance-type":"m5.2xlarge"}},"status":{"allocatable":{"cpu":"7910m","memory":"31369740Ki","pods":"58"}}}`, n/250, n%250)
	}
	b.WriteString(`],"pods":[`)
	r := rand.New(rand.NewPCG(1, 1))
	for i := range pods {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"metadata":{"name":"web-7d9f8b6c5-%s","namespace":"shop","uid":"%08x-%04x-4%03x-a%03x-%012x","labels":{"app":"web","pod-template-hash":"7d9f8b6c5"},"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web-7d9f8b6c5","uid":"5c1e2b9a-0d1f-4e7a-9b3c-2f6d8e1a4b7c","controller":true}]},"spec":{"nodeName":"ip-10-0-%d-%d.ec2.internal","containers":[{"name":"web","image":"registry.example.com/web:v1.4.2","resources":{"requests":{"cpu":"250m","memory":"512Mi"},"limits":{"memory":"1Gi"}}}],"tolerations":[{"key":"node.kubernetes.io/not-ready","operator":"Exists","effect":"NoExecute","tolerationSeconds":300}]},"status":{"phase":"Running"}}`,
			randName(r, 5), r.Uint32(), r.Uint32()&0xffff, r.Uint32()&0xfff, r.Uint32()&0xfff, r.Uint64()&0xffffffffffff, (i/30)/250, (i/30)%250)
	}
	b.WriteString(`]}`)
	data, err := zstd.NewWriter(nil)
	if err != nil {
		panic(err)
	}
	return data.EncodeAll([]byte(b.String()), nil)
}

func TestHostileInputsPeakMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a child process per input")
	}
	dir := t.TempDir()
	for i, h := range hostileInputs() {
		data := h.make()
		if len(data) > maxInput {
			t.Fatalf("%s: input is %d bytes, more than 1 MiB", h.name, len(data))
		}
		path := filepath.Join(dir, fmt.Sprint(i))
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(os.Args[0], "-test.run=^TestHostileChild$", "-test.count=1")
		cmd.Env = append(withoutGCEnv(), "DOVETAIL_HOSTILE_ENTRY="+h.entry, "DOVETAIL_HOSTILE_FILE="+path)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: child failed: %v\n%s", h.name, err, out)
		}
		outcome, rss := childOutcome(out)
		t.Logf("%-62s input %8d B  peak RSS %4d MiB  %s", h.name, len(data), rss>>20, truncate(outcome, 110))
		if rss < 0 || rss >= maxPeakRSS {
			t.Errorf("%s: peak RSS %d MiB, want < %d MiB", h.name, rss>>20, maxPeakRSS>>20)
		}
		want := h.want
		if want == "" {
			want = "refused"
		}
		if want != "bounded" && !strings.HasPrefix(outcome, want) {
			t.Errorf("%s: outcome %q, want %s", h.name, outcome, want)
		}
	}
}

// TestHostileChild decodes one input in a child process (see TestHostileInputsPeakMemory).
func TestHostileChild(t *testing.T) {
	path := os.Getenv("DOVETAIL_HOSTILE_FILE")
	if path == "" {
		t.Skip("run by TestHostileInputsPeakMemory")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	err = decodeEntry(os.Getenv("DOVETAIL_HOSTILE_ENTRY"), data, filepath.Dir(path))
	fmt.Println("PEAK", peakRSS(t))
	switch {
	case err == nil:
		fmt.Println("OUTCOME decoded")
	case errors.Is(err, events.ErrMalformed) || errors.As(err, new(*manifests.Error)):
		fmt.Println("OUTCOME refused:", strings.ReplaceAll(err.Error(), "\n", " "))
	default:
		fmt.Println("OUTCOME error (not malformed):", err)
	}
}

func decodeEntry(entry string, data []byte, dir string) error {
	ctx := context.Background()
	switch entry {
	case "snapshot":
		_, err := events.DecodeSnapshot(data)
		return err
	case "command":
		_, err := events.DecodeCommand(data)
		return err
	case "event":
		// The payload inside a real envelope (as the agent's bytes would arrive), unless the
		// input is junk to carry as data.
		env, err := events.Decode(envelope(data))
		if err != nil {
			return err
		}
		_, err = events.Codec{}.Snapshot(ctx, env)
		return err
	case "claimcheck":
		store := events.FileBlobStore{Dir: dir}
		uri, err := store.Put(ctx, "c/blob.json.zst", data)
		if err != nil {
			return err
		}
		ev, err := events.Codec{Blobs: store, MaxInlineBytes: 1}.NewEvent(ctx, "prod", "agent", events.TypeSnapshot, "s1", data)
		if err != nil {
			return err
		}
		env, err := events.Decode(ev)
		if err != nil {
			return err
		}
		if env.DataRef != uri && !strings.HasSuffix(env.DataRef, ".json.zst") {
			return fmt.Errorf("dataref %s", env.DataRef)
		}
		_, err = events.Codec{Blobs: store}.Snapshot(ctx, env)
		return err
	case "notice":
		_, err := notices.Decode(data)
		return err
	case "manifest":
		_, err := manifests.LoadReader("hostile.yaml", bytes.NewReader(data))
		return err
	}
	return fmt.Errorf("unknown entry %q", entry)
}

// envelope wraps data as the data_base64 of a snapshot event.
func envelope(data []byte) []byte {
	return []byte(`{"specversion":"1.0","id":"e1","type":"` + events.TypeSnapshot + `","source":"dovetail/prod/agent","time":"2026-03-01T12:00:00Z",` +
		`"datacontenttype":"` + events.ContentTypeJSONZstd + `","dovetailschema":1,"data_base64":"` + base64.StdEncoding.EncodeToString(data) + `"}`)
}

// peakRSS is the process's peak resident set (VmHWM of /proc/self/status, in bytes): the high
// water mark of this process image only (a child's rusage maxrss would include its parent's, which
// Linux carries across fork and exec).
func peakRSS(t *testing.T) int64 {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc/self/status")
	return 0
}

// childOutcome reads the child's outcome and peak RSS lines.
func childOutcome(out []byte) (string, int64) {
	outcome, peak := "no outcome: "+string(out), int64(-1)
	for _, l := range strings.Split(string(out), "\n") {
		if s, ok := strings.CutPrefix(l, "OUTCOME "); ok {
			outcome = s
		}
		if s, ok := strings.CutPrefix(l, "PEAK "); ok {
			peak, _ = strconv.ParseInt(s, 10, 64)
		}
	}
	return outcome, peak
}

func withoutGCEnv() []string {
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "GOGC=") && !strings.HasPrefix(e, "GOMEMLIMIT=") {
			env = append(env, e)
		}
	}
	return env
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
