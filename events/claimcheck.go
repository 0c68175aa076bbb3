package events

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"
)

// DefaultMaxInlineBytes is the largest payload carried inside an event: 240 KiB (245,760 bytes)
// of data as written on the wire (base64 of the compressed payload). It leaves 16 KiB for the
// envelope under the classic 256 KiB SQS message limit (AWS SQS developer guide, "Amazon SQS
// message quotas"), so the same event fits every transport.
const DefaultMaxInlineBytes = 240 << 10

// ErrTooLarge is returned when a payload exceeds the inline limit and no BlobStore is configured.
var ErrTooLarge = errors.New("payload too large for an event")

// BlobStore keeps payloads too large for an event (the claim-check pattern). Put must be
// idempotent for the same key and data; keys are relative slash-separated paths.
type BlobStore interface {
	// Put stores data under key and returns the URI Get accepts.
	Put(ctx context.Context, key string, data []byte) (uri string, err error)
	// Get returns what Put stored at uri.
	Get(ctx context.Context, uri string) ([]byte, error)
}

// Codec builds and opens events, claim-checking payloads larger than MaxInlineBytes into Blobs.
// The zero value inlines everything up to DefaultMaxInlineBytes and refuses larger payloads.
type Codec struct {
	// Blobs stores oversize payloads; nil refuses them with ErrTooLarge.
	Blobs BlobStore
	// MaxInlineBytes is the largest base64 data carried inline, in bytes; 0 means DefaultMaxInlineBytes.
	MaxInlineBytes int
	// Now is the clock for the event "time"; nil means time.Now.
	Now func() time.Time
}

func (c Codec) limit() int {
	if c.MaxInlineBytes > 0 {
		return c.MaxInlineBytes
	}
	return DefaultMaxInlineBytes
}

// NewEvent is the package NewEvent with claim-check: when the payload's base64 size exceeds
// MaxInlineBytes it is stored in Blobs under "<cluster>/<sha256>.json.zst" (content-addressed,
// so a redelivered decision stores the same blob once) and the event carries the "dataref"
// and "dovetaildigest" extensions instead of data.
func (c Codec) NewEvent(ctx context.Context, cluster, component, typ, id string, payload any, opts ...Option) ([]byte, error) {
	if err := checkEnvelopeArgs(cluster, component, typ, id); err != nil {
		return nil, err
	}
	data, err := encodeFor(typ, payload)
	if err != nil {
		return nil, err
	}
	var o eventOptions
	for _, opt := range opts {
		opt(&o)
	}
	now := time.Now
	if c.Now != nil {
		now = c.Now
	}
	size := base64.StdEncoding.EncodedLen(len(data))
	if size <= c.limit() {
		return buildEvent(cluster, component, typ, id, data, "", "", now(), o)
	}
	if c.Blobs == nil {
		return nil, fmt.Errorf("%w: data of event %q is %d bytes as base64, limit %d, and no BlobStore is configured for claim-check",
			ErrTooLarge, id, size, c.limit())
	}
	sum := sha256.Sum256(data)
	digest := hex.EncodeToString(sum[:])
	uri, err := c.Blobs.Put(ctx, cluster+"/"+digest+".json.zst", data)
	if err != nil {
		return nil, fmt.Errorf("claim-check of event %q: storing %d bytes: %w", id, len(data), err)
	}
	return buildEvent(cluster, component, typ, id, nil, uri, "sha256:"+digest, now(), o)
}

// Payload returns the encoded payload of env: its data, or for a claim-checked event the blob
// at its dataref, checked against its digest. A missing or corrupt blob wraps ErrMalformed; a
// BlobStore failure (maybe transient) does not.
func (c Codec) Payload(ctx context.Context, env Envelope) ([]byte, error) {
	if env.DataRef == "" {
		return env.Data, nil
	}
	if c.Blobs == nil {
		return nil, fmt.Errorf("%w: %s: event %q is claim-checked but no BlobStore is configured", ErrMalformed, ExtensionDataRef, env.ID)
	}
	data, err := c.Blobs.Get(ctx, env.DataRef)
	if errors.Is(err, ErrBlobNotFound) || errors.Is(err, ErrBlobTooLarge) {
		return nil, fmt.Errorf("%w: %s: %w", ErrMalformed, ExtensionDataRef, err)
	}
	if err != nil {
		return nil, fmt.Errorf("fetching claim-checked payload of event %q: %w", env.ID, err)
	}
	sum := sha256.Sum256(data)
	if got := "sha256:" + hex.EncodeToString(sum[:]); got != env.DataDigest {
		return nil, fmt.Errorf("%w: %s: blob %s has digest %s, event says %s", ErrMalformed, ExtensionDigest, env.DataRef, got, env.DataDigest)
	}
	return data, nil
}

// Snapshot opens a TypeSnapshot event's payload.
func (c Codec) Snapshot(ctx context.Context, env Envelope) (*Snapshot, error) {
	if env.Type != TypeSnapshot {
		return nil, fmt.Errorf("%w: type: %q is not %q", ErrMalformed, env.Type, TypeSnapshot)
	}
	data, err := c.Payload(ctx, env)
	if err != nil {
		return nil, err
	}
	return Snapshots.Decode(data)
}

// PodsPending opens a TypePodsPending event's payload.
func (c Codec) PodsPending(ctx context.Context, env Envelope) (*PodsPending, error) {
	if env.Type != TypePodsPending {
		return nil, fmt.Errorf("%w: type: %q is not %q", ErrMalformed, env.Type, TypePodsPending)
	}
	data, err := c.Payload(ctx, env)
	if err != nil {
		return nil, err
	}
	return Snapshots.DecodePodsPending(data)
}

// Command opens a TypeCommand event's payload.
func (c Codec) Command(ctx context.Context, env Envelope) (*Command, error) {
	if env.Type != TypeCommand {
		return nil, fmt.Errorf("%w: type: %q is not %q", ErrMalformed, env.Type, TypeCommand)
	}
	data, err := c.Payload(ctx, env)
	if err != nil {
		return nil, err
	}
	return DecodeCommand(data)
}

// MaxBlobBytes bounds a claim-checked payload as stored (compressed): 64 MiB, an order of
// magnitude above the largest snapshot Dovetail writes. The stores refuse a larger blob before
// reading it, and read through a limit, so a reference to a huge object costs no memory.
const MaxBlobBytes = 64 << 20

// ErrBlobTooLarge is wrapped when a blob exceeds MaxBlobBytes (a malformed reference: poison).
var ErrBlobTooLarge = errors.New("blob exceeds MaxBlobBytes")

// ReadBlob reads at most MaxBlobBytes from r, refusing more; what names the blob in the error.
func ReadBlob(r io.Reader, what string) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxBlobBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxBlobBytes {
		return nil, fmt.Errorf("%w: %s is larger than %d bytes", ErrBlobTooLarge, what, MaxBlobBytes)
	}
	return data, nil
}

// ErrBlobNotFound is returned by the BlobStores here when a URI names nothing stored.
var ErrBlobNotFound = errors.New("blob not found")

var blobKeyRE = regexp.MustCompile(`^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$`)

// CheckBlobKey refuses a key that is not a relative slash-separated path of [A-Za-z0-9._-] segments
// without "." or ".." segments: the shape Codec writes ("<cluster>/<sha256>.json.zst"), which every
// BlobStore may rely on.
func CheckBlobKey(key string) error {
	if !blobKeyRE.MatchString(key) {
		return fmt.Errorf("blob key %q: must be a relative path of [A-Za-z0-9._-] segments", key)
	}
	for _, seg := range strings.Split(key, "/") {
		if seg == "." || seg == ".." {
			return fmt.Errorf("blob key %q: must not contain %q segments", key, seg)
		}
	}
	return nil
}

// MemoryBlobStore keeps blobs in memory under "mem://<key>" URIs; for tests and one-process
// local dev. The zero value is ready to use.
type MemoryBlobStore struct {
	mu    sync.RWMutex
	blobs map[string][]byte
}

// Put stores a copy of data.
func (m *MemoryBlobStore) Put(_ context.Context, key string, data []byte) (string, error) {
	if err := CheckBlobKey(key); err != nil {
		return "", err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.blobs == nil {
		m.blobs = map[string][]byte{}
	}
	m.blobs[key] = append([]byte(nil), data...)
	return "mem://" + key, nil
}

// Get returns a copy of the blob at uri, or ErrBlobNotFound.
func (m *MemoryBlobStore) Get(_ context.Context, uri string) ([]byte, error) {
	key, ok := strings.CutPrefix(uri, "mem://")
	if !ok {
		return nil, fmt.Errorf("%w: %q is not a mem:// URI", ErrBlobNotFound, uri)
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	b, ok := m.blobs[key]
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrBlobNotFound, uri)
	}
	return append([]byte(nil), b...), nil
}

// Len is the number of blobs stored.
func (m *MemoryBlobStore) Len() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return len(m.blobs)
}

// FileBlobStore keeps blobs as files under Dir (local dev), with "file://" URIs. Writes go to a
// temporary file renamed into place, so a reader never sees half a blob.
type FileBlobStore struct {
	Dir string
}

// Put writes data to Dir/key.
func (f FileBlobStore) Put(_ context.Context, key string, data []byte) (string, error) {
	if err := CheckBlobKey(key); err != nil {
		return "", err
	}
	dir, err := filepath.Abs(f.Dir)
	if err != nil {
		return "", fmt.Errorf("blob store dir %q: %w", f.Dir, err)
	}
	path := filepath.Join(dir, filepath.FromSlash(key))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".blob-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name()) // no-op after a successful rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", err
	}
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(path)}).String(), nil
}

// Get reads the blob at a file:// URI inside Dir; URIs outside Dir are refused.
func (f FileBlobStore) Get(_ context.Context, uri string) ([]byte, error) {
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != "file" {
		return nil, fmt.Errorf("%w: %q is not a file:// URI", ErrBlobNotFound, uri)
	}
	dir, err := filepath.Abs(f.Dir)
	if err != nil {
		return nil, fmt.Errorf("blob store dir %q: %w", f.Dir, err)
	}
	path := filepath.Clean(filepath.FromSlash(u.Path))
	rel, err := filepath.Rel(dir, path)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return nil, fmt.Errorf("%w: %s is outside the blob store dir %s", ErrBlobNotFound, uri, dir)
	}
	file, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrBlobNotFound, uri)
	}
	if err != nil {
		return nil, err
	}
	defer file.Close()
	if st, err := file.Stat(); err == nil && st.Size() > MaxBlobBytes {
		return nil, fmt.Errorf("%w: %s is %d bytes, at most %d", ErrBlobTooLarge, uri, st.Size(), MaxBlobBytes)
	}
	return ReadBlob(file, uri)
}

// URI is the mem:// URI Put gives key.
func (m *MemoryBlobStore) URI(key string) string { return "mem://" + key }

// URI is the file:// URI Put gives key (under Dir made absolute).
func (f FileBlobStore) URI(key string) string {
	dir, err := filepath.Abs(f.Dir)
	if err != nil {
		dir = f.Dir
	}
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(filepath.Join(dir, filepath.FromSlash(key)))}).String()
}

// LatestSnapshotKey is the well-known BlobStore key of a cluster's latest snapshot,
// "<cluster>/latest-snapshot.json.zst" (the EncodeSnapshot bytes). The agent overwrites it with
// every snapshot it publishes, so a function that keeps no state between invocations and
// receives no snapshot events (the interruption function on Lambda) reads the cluster there.
func LatestSnapshotKey(cluster string) string { return cluster + "/latest-snapshot.json.zst" }

// KeyedBlobStore is a BlobStore that can name the URI of a key without storing it (the stores
// here and s3blob.Store).
type KeyedBlobStore interface {
	BlobStore
	URI(key string) string
}

// PutLatestSnapshot stores an EncodeSnapshot payload as the cluster's latest snapshot.
func PutLatestSnapshot(ctx context.Context, store BlobStore, cluster string, encoded []byte) error {
	_, err := store.Put(ctx, LatestSnapshotKey(cluster), encoded)
	return err
}

// ReadLatestSnapshot returns the cluster's latest snapshot from store, or nil when none was
// stored yet. A stored snapshot that does not decode wraps ErrMalformed; a store failure is
// returned as it is (maybe transient).
func ReadLatestSnapshot(ctx context.Context, store BlobStore, cluster string) (*Snapshot, error) {
	return ReadLatestSnapshotAfter(ctx, store, cluster, math.MinInt64)
}

// ReadLatestSnapshotAfter is ReadLatestSnapshot for a caller that holds the snapshot of revision
// after: it returns nil, without decoding, when the latest is not newer (read from the head of
// its payload, PeekRevision). Each message's handler checks the latest this way, and it is
// usually the snapshot the message carried.
func ReadLatestSnapshotAfter(ctx context.Context, store BlobStore, cluster string, after int64) (*Snapshot, error) {
	ks, ok := store.(KeyedBlobStore)
	if !ok {
		return nil, fmt.Errorf("blob store %T cannot name the URI of %s", store, LatestSnapshotKey(cluster))
	}
	data, err := store.Get(ctx, ks.URI(LatestSnapshotKey(cluster)))
	if errors.Is(err, ErrBlobNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the latest snapshot of %s: %w", cluster, err)
	}
	if rev, ok := PeekRevision(data); ok && rev <= after {
		return nil, nil
	}
	snap, err := Snapshots.Decode(data)
	if err != nil {
		return nil, fmt.Errorf("the latest snapshot of %s: %w", cluster, err)
	}
	if snap.Cluster != cluster {
		return nil, fmt.Errorf("%w: snapshot.cluster: %q stored as the latest snapshot of %q", ErrMalformed, snap.Cluster, cluster)
	}
	if snap.Revision <= after {
		return nil, nil
	}
	return snap, nil
}
