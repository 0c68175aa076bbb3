package events

import (
	"crypto/sha256"
	"sync"
	"sync/atomic"

	"k8s.io/utils/lru"
)

// SnapshotMemo decodes each distinct snapshot payload once per process and hands every caller
// its own deep copy. The functions that share a process (local dev, a NATS worker running
// several) receive the same snapshot event each, and each message's handler also reads the
// cluster's latest snapshot (the same bytes, usually); at 10,000 pending pods one decode costs
// about 2 s of a loaded 2-core machine, and make scale's functions spent over half the machine
// decoding (docs/scale.md, "N = 10,000"). A copy costs a small share of a decode
// (BenchmarkSnapshotMemo), and keeps handlers free to change what they were given.
//
// Payloads are keyed by their SHA-256, so a hit is the same bytes and hence the same snapshot;
// concurrent callers of one payload wait for one decode. Errors are not remembered: a payload
// that fails decodes (and fails) again, as without the memo. The zero value is not usable; use
// NewSnapshotMemo.
type SnapshotMemo struct {
	mu      sync.Mutex // makes find-or-add one step
	entries *lru.Cache // [sha256.Size]byte → *memoEntry
	decodes atomic.Int64
}

type memoEntry struct {
	once sync.Once
	snap *Snapshot // never handed out: callers get copies
	err  error
}

// NewSnapshotMemo remembers the last size decoded snapshots (size < 1 is 1). Each holds a
// decoded snapshot in memory: two cover a snapshot event and the latest snapshot it is checked
// against.
func NewSnapshotMemo(size int) *SnapshotMemo {
	return &SnapshotMemo{entries: lru.New(max(size, 1))}
}

// Snapshots is the process's memo, used by Codec.Snapshot and ReadLatestSnapshot.
var Snapshots = NewSnapshotMemo(snapshotMemoSize)

// snapshotMemoSize is the snapshot event in hand, the latest snapshot, and one more that a
// slower function is still on.
const snapshotMemoSize = 3

// Decode is DecodeSnapshot(data) through the memo: the caller's own deep copy of the decoded
// snapshot, or DecodeSnapshot's error.
func (m *SnapshotMemo) Decode(data []byte) (*Snapshot, error) {
	key := sha256.Sum256(data)
	m.mu.Lock()
	var e *memoEntry
	if v, ok := m.entries.Get(key); ok {
		e = v.(*memoEntry)
	} else {
		e = &memoEntry{}
		m.entries.Add(key, e)
	}
	m.mu.Unlock()
	e.once.Do(func() {
		m.decodes.Add(1)
		e.snap, e.err = DecodeSnapshot(data)
	})
	if e.err != nil {
		m.mu.Lock()
		m.entries.Remove(key)
		m.mu.Unlock()
		return nil, e.err
	}
	return e.snap.DeepCopy(), nil
}
