// Command zstdfile writes a zstd-compressed copy of a data file for go:embed, so a binary carries
// the compressed bytes (the embedded AWS catalog: 1.7 MB of JSON, 0.03 MB compressed) while the
// repository keeps the original beside it for review and provenance. The output is the same for
// the same input (one encoder goroutine, fixed level, no checksum-affecting options vary), so
// `make verify-generated` can check it is current.
//
// Usage: go run ./hack/zstdfile -o data/file.json.zst data/file.json
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/klauspost/compress/zstd"
)

func main() {
	out := flag.String("o", "", "compressed file to write (required)")
	flag.Parse()
	if *out == "" || flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: zstdfile -o OUT.zst IN")
		os.Exit(2)
	}
	if err := write(*out, flag.Arg(0)); err != nil {
		fmt.Fprintln(os.Stderr, "zstdfile:", err)
		os.Exit(1)
	}
}

func write(out, in string) error {
	raw, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedBestCompression), zstd.WithEncoderConcurrency(1))
	if err != nil {
		return err
	}
	return os.WriteFile(out, enc.EncodeAll(raw, nil), 0o644)
}
