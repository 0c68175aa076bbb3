package catalog

import (
	"fmt"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// lazy is a value built on first use and cached, with the error of building it. It replaces a
// package-level sync.OnceValues(func ...): that closure is created by the package's init, so
// whatever it reads (an embedded file) is linked into every binary that imports the package. A
// zero lazy needs no initialiser and get takes the builder at the call site, so the linker drops
// embedded data that only a builder reads from a binary that never calls it: the AWS Lambda
// bootstraps carry none of the Azure data (their size budget, hack/package.sh).
type lazy[T any] struct {
	once sync.Once
	v    T
	err  error
}

// get returns build's value and error, calling build only the first time.
func (l *lazy[T]) get(build func() (T, error)) (T, error) {
	l.once.Do(func() { l.v, l.err = build() })
	return l.v, l.err
}

// unzstd decompresses an embedded file make generate wrote (hack/zstdfile, or
// TestEmbeddedAWSRecordsAreTheJSON); what names it
// in the error, which means a corrupt build.
func unzstd(what string, compressed []byte) ([]byte, error) {
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1))
	if err != nil {
		return nil, err
	}
	defer dec.Close()
	b, err := dec.DecodeAll(compressed, nil)
	if err != nil {
		return nil, fmt.Errorf("embedded %s: %w", what, err)
	}
	return b, nil
}
