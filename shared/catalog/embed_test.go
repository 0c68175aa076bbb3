package catalog

import (
	"bytes"
	"os"
	"testing"
)

func mustAWSJSON(tb testing.TB) []byte {
	tb.Helper()
	b, err := awsCatalogJSON()
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// The embedded compressed catalog is the reviewed JSON beside it, byte for byte: a data update
// that forgets `make generate` fails here.
func TestEmbeddedAWSCatalogIsTheJSON(t *testing.T) {
	want, err := os.ReadFile("data/ec2_instance_types.json")
	if err != nil {
		t.Fatal(err)
	}
	if got := mustAWSJSON(t); !bytes.Equal(got, want) {
		t.Fatalf("data/ec2_instance_types.json.zst decompresses to %d bytes that differ from data/ec2_instance_types.json (%d bytes): run make generate",
			len(got), len(want))
	}
}

// BenchmarkAWSCatalogDecompress is what the compression costs a cold start that loads the
// embedded catalog (once per process).
func BenchmarkAWSCatalogDecompress(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		mustAWSJSON(b)
	}
}
