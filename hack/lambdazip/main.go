// Command lambdazip writes a Lambda deployment zip holding one executable named "bootstrap"
// (what the provided.al2023 runtime runs). The entry has mode 0755 and a fixed time, so the
// same binary always gives the same zip (and the same CodeSha256). No zip binary is needed.
//
// Usage: go run ./hack/lambdazip -o dist/provision-arm64.zip dist/provision/arm64/bootstrap
package main

import (
	"archive/zip"
	"flag"
	"fmt"
	"io"
	"os"
	"time"
)

// modTime is fixed for reproducible zips (the zip format's DOS time starts in 1980).
var modTime = time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)

func main() {
	out := flag.String("o", "", "zip file to write (required)")
	flag.Parse()
	if *out == "" || flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: lambdazip -o OUT.zip PATH/TO/bootstrap")
		os.Exit(2)
	}
	if err := write(*out, flag.Arg(0)); err != nil {
		fmt.Fprintln(os.Stderr, "lambdazip:", err)
		os.Exit(1)
	}
}

func write(out, bootstrap string) error {
	in, err := os.Open(bootstrap)
	if err != nil {
		return err
	}
	defer in.Close()
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	zw := zip.NewWriter(f)
	hdr := &zip.FileHeader{Name: "bootstrap", Method: zip.Deflate, Modified: modTime}
	hdr.SetMode(0o755) // Lambda runs the bootstrap as-is: it must be executable
	w, err := zw.CreateHeader(hdr)
	if err == nil {
		_, err = io.Copy(w, in)
	}
	if err == nil {
		err = zw.Close()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
