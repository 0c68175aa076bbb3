package catalog

import (
	"bytes"
	"encoding/gob"
	"flag"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// writeEmbedded makes TestEmbeddedAWSRecordsAreTheJSON write the embedded records file from the
// JSON instead of checking it (`make generate`).
var writeEmbedded = flag.Bool("write-embedded", false, "write data/ec2_instance_types.gob.zst from data/ec2_instance_types.json")

// mustAWSJSON is the reviewed catalog file the embedded records come from.
func mustAWSJSON(tb testing.TB) []byte {
	tb.Helper()
	b, err := os.ReadFile("data/ec2_instance_types.json")
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// pointerSet is the bitmask of v's non-nil pointer fields (v a struct of at most 64 fields).
func pointerSet(v reflect.Value) uint64 {
	var set uint64
	for i := range v.NumField() {
		if f := v.Field(i); f.Kind() == reflect.Pointer && !f.IsNil() {
			set |= 1 << i
		}
	}
	return set
}

// encodeRecords is the gob form of records (what data/ec2_instance_types.gob.zst holds before
// compression).
func encodeRecords(recs []awsRecord) ([]byte, error) {
	out := make([]gobRecord, len(recs))
	for i := range recs {
		out[i] = gobRecord{R: recs[i], Set: pointerSet(reflect.ValueOf(recs[i]))}
		if ka := recs[i].KarpenterAllocatable; ka != nil {
			out[i].SetAllocatable = pointerSet(reflect.ValueOf(*ka))
		}
	}
	var b bytes.Buffer
	if err := gob.NewEncoder(&b).Encode(out); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// The embedded records are the reviewed JSON's, field for field, pointers to zero values
// included (gob alone would drop them); with -write-embedded the test writes them instead (the
// same bytes for the same JSON: one encoder, fixed level, gob's field order). A data update
// that forgets `make generate` fails here.
func TestEmbeddedAWSRecordsAreTheJSON(t *testing.T) {
	want, err := parseRecords(mustAWSJSON(t))
	if err != nil {
		t.Fatal(err)
	}
	if *writeEmbedded {
		raw, err := encodeRecords(want)
		if err != nil {
			t.Fatal(err)
		}
		enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedBestCompression), zstd.WithEncoderConcurrency(1))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile("data/ec2_instance_types.gob.zst", enc.EncodeAll(raw, nil), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := embeddedAWSRecords()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("data/ec2_instance_types.gob.zst holds %d records, data/ec2_instance_types.json %d: run make generate", len(got), len(want))
	}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Fatalf("record %d (%s) differs from data/ec2_instance_types.json: run make generate\n got %+v\nwant %+v", i, want[i].Name, got[i], want[i])
		}
	}
	// A record with a known false or zero keeps it: a1.2xlarge's encryption_in_transit is false,
	// and gob would have sent nothing for it.
	for _, r := range got {
		if r.Name == "a1.2xlarge" && (r.EncryptionInTransit == nil || *r.EncryptionInTransit) {
			t.Errorf("a1.2xlarge encryption_in_transit %v, want a pointer to false", r.EncryptionInTransit)
		}
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
		if _, err := unzstd("AWS catalog", awsRecordsGobZstd); err != nil {
			b.Fatal(err)
		}
	}
}
