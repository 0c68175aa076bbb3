package events

import (
	"crypto/sha256"
	"slices"
	"sync"
	"sync/atomic"

	"k8s.io/utils/lru"
)

// SnapshotMemo decodes each distinct snapshot or pods-pending payload once per process and hands
// every caller its own deep copy. The functions that share a process (local dev, a NATS worker
// running several) receive the same event each, and each message's handler also reads the
// cluster's latest snapshot (the same bytes, usually); at 10,000 pending pods one decode costs
// about 2 s of a loaded 2-core machine, and make scale's functions spent over half the machine
// decoding (docs/scale.md, "N = 10,000"). A pods-pending event carries a whole snapshot too, and
// all four functions accept it, so it goes through the memo as well (docs/scale.md, "Eighth
// pass"). A copy costs a small share of a decode (BenchmarkSnapshotMemo), and keeps handlers free
// to change what they were given.
//
// Payloads are keyed by their kind and SHA-256, so a hit is the same bytes read as the same type
// and hence the same value; concurrent callers of one payload wait for one decode. Errors are not
// remembered: a payload that fails decodes (and fails) again, as without the memo. The zero value
// is not usable; use NewSnapshotMemo.
type SnapshotMemo struct {
	mu      sync.Mutex // makes find-or-add one step
	entries *lru.Cache // memoKey → *memoEntry
	decodes atomic.Int64
}

// memoKey tells a snapshot payload from a pods-pending one of the same bytes, so a payload sent
// under the wrong event type is decoded (and refused) as that type, never served the other's value.
type memoKey struct {
	kind byte // 's' snapshot, 'p' pods pending
	sum  [sha256.Size]byte
}

type memoEntry struct {
	once sync.Once
	val  any // *Snapshot or *PodsPending; never handed out: callers get copies
	err  error
}

// NewSnapshotMemo remembers the last size decoded payloads (size < 1 is 1). Each holds a
// decoded snapshot in memory: two cover an event and the latest snapshot it is checked against.
func NewSnapshotMemo(size int) *SnapshotMemo {
	return &SnapshotMemo{entries: lru.New(max(size, 1))}
}

// Snapshots is the process's memo, used by Codec.Snapshot, Codec.PodsPending and
// ReadLatestSnapshot.
var Snapshots = NewSnapshotMemo(snapshotMemoSize)

// snapshotMemoSize is the event in hand, the latest snapshot, and one more that a slower
// function is still on.
const snapshotMemoSize = 3

// Decode is DecodeSnapshot(data) through the memo: the caller's own deep copy of the decoded
// snapshot, or DecodeSnapshot's error.
func (m *SnapshotMemo) Decode(data []byte) (*Snapshot, error) {
	v, err := m.decode('s', data, func() (any, error) { return DecodeSnapshot(data) })
	if err != nil {
		return nil, err
	}
	return v.(*Snapshot).DeepCopy(), nil
}

// DecodePodsPending is DecodePodsPending(data) through the memo: the caller's own deep copy of
// the decoded event payload, or DecodePodsPending's error.
func (m *SnapshotMemo) DecodePodsPending(data []byte) (*PodsPending, error) {
	v, err := m.decode('p', data, func() (any, error) { return DecodePodsPending(data) })
	if err != nil {
		return nil, err
	}
	return v.(*PodsPending).DeepCopy(), nil
}

// decode finds or adds the entry of (kind, data) and runs fn once for it.
func (m *SnapshotMemo) decode(kind byte, data []byte, fn func() (any, error)) (any, error) {
	key := memoKey{kind: kind, sum: sha256.Sum256(data)}
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
		e.val, e.err = fn()
	})
	if e.err != nil {
		m.mu.Lock()
		m.entries.Remove(key)
		m.mu.Unlock()
		return nil, e.err
	}
	return e.val, nil
}

// DeepCopy returns a copy of p that shares no memory with it (nil for nil).
func (p *PodsPending) DeepCopy() *PodsPending {
	if p == nil {
		return nil
	}
	return &PodsPending{Pods: slices.Clone(p.Pods), Snapshot: p.Snapshot.DeepCopy()}
}
