package events

import (
	"errors"
	"testing"
)

// FuzzDecode: any input decodes or is refused as ErrMalformed; nothing panics. The seeds are the
// inputs that once crashed or slipped through (run with the tests; go test -fuzz FuzzDecode ./events
// explores further).
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"specversion":"1.0","data_base64":5}`, // panicked inside the CloudEvents SDK
		`{"specversion":"1.0"}`,
		`{"specversion":"1.0","id":"a","type":"dev.dovetail.snapshot","source":"dovetail/c/agent","data_base64":"AAAA"}`,
		`[]`, `null`, `{"specversion":1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, err := Decode(data); err != nil && !errors.Is(err, ErrMalformed) {
			t.Fatalf("Decode(%q): %v does not wrap ErrMalformed", data, err)
		}
	})
}
