package catalog

import (
	"bytes"
	"os"
	"strings"
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

// The Azure files are embedded compressed too; each must decompress to the reviewed file beside it.
func TestEmbeddedAzureDataIsTheFiles(t *testing.T) {
	for _, f := range []struct {
		path       string
		compressed []byte
	}{
		{"data/azure/vm_sizes.json", azureSizesZstd},
		{"data/azure/on_demand_prices.csv", azurePricesZstd},
	} {
		want, err := os.ReadFile(f.path)
		if err != nil {
			t.Fatal(err)
		}
		got, err := unzstd(f.path, f.compressed)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s.zst decompresses to %d bytes that differ from %s (%d bytes): run make generate", f.path, len(got), f.path, len(want))
		}
	}
}

// A corrupt embedded file is an error naming it, not a panic.
func TestUnzstdNamesACorruptFile(t *testing.T) {
	_, err := unzstd("Azure prices", []byte("not zstd"))
	if err == nil || !strings.HasPrefix(err.Error(), "embedded Azure prices: ") {
		t.Fatalf("unzstd of a corrupt file: %v, want an error starting \"embedded Azure prices: \"", err)
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
