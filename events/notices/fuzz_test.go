package notices

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dovetail-dev/dovetail/events"
)

// FuzzDecode: any input gives notices or an error wrapping events.ErrMalformed; nothing panics.
// The seeds are every real sample under testdata (AWS and Azure) and the shapes that once
// slipped through or cost memory (run with the tests; make fuzz explores further).
func FuzzDecode(f *testing.F) {
	for _, dir := range []string{"testdata/aws", "testdata/azure"} {
		entries, err := os.ReadDir(dir)
		if err != nil {
			f.Fatal(err)
		}
		for _, e := range entries {
			if b, err := os.ReadFile(filepath.Join(dir, e.Name())); err == nil {
				f.Add(b)
			}
		}
	}
	for _, s := range []string{
		`{"Messages":[{}]}`, // SQS response of empty messages (the 1 MiB memory case, small)
		`{"detail-type":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}`, // nesting beyond the bound
		`[]`, `[{}]`, `{"DocumentIncarnation":1,"Events":null}`, `{"specversion":"1.0"}`, `"x"`, `null`,
		`{"version":"0","id":"1","detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2","time":"2026-01-01T00:00:00Z","detail":{"instance-id":5}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ns, err := Decode(data)
		if err != nil {
			if !errors.Is(err, events.ErrMalformed) {
				t.Fatalf("Decode(%q): %v does not wrap ErrMalformed", data, err)
			}
			if len(err.Error()) > 4096 {
				t.Fatalf("Decode(%q): error of %d bytes", data, len(err.Error()))
			}
			return
		}
		for _, n := range ns {
			if n.Kind == "" || !strings.Contains("aws azure", n.Cloud) {
				t.Fatalf("Decode(%q): notice without kind or cloud: %+v", data, n)
			}
		}
	})
}
