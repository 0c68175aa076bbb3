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
	mu      sync.Mutex // makes find-or-add one step, and guards newest
	entries *lru.Cache // memoKey → *memoEntry
	decodes atomic.Int64
	// newest is, per cluster, the snapshot of the highest revision (of two alike, the later
	// time) this memo decoded, alone or in a pods-pending batch. It outlives its entry's eviction
	// until a newer one replaces it: one decoded snapshot per cluster.
	newest map[string]*Snapshot
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
	return &SnapshotMemo{entries: lru.New(max(size, 1)), newest: map[string]*Snapshot{}}
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
	v, err := m.decode('s', data, func() (any, error) {
		s, err := DecodeSnapshot(data)
		if err == nil {
			m.noteNewest(s)
		}
		return s, err
	})
	if err != nil {
		return nil, err
	}
	return v.(*Snapshot).DeepCopy(), nil
}

// DecodePodsPending is DecodePodsPending(data) through the memo: the caller's own deep copy of
// the decoded event payload, or DecodePodsPending's error.
func (m *SnapshotMemo) DecodePodsPending(data []byte) (*PodsPending, error) {
	v, err := m.decode('p', data, func() (any, error) {
		p, err := DecodePodsPending(data)
		if err == nil {
			m.noteNewest(p.Snapshot)
		}
		return p, err
	})
	if err != nil {
		return nil, err
	}
	return v.(*PodsPending).DeepCopy(), nil
}

// Newer returns the caller's own deep copy of the newest snapshot of cluster this memo decoded
// when its revision is above rev, else nil. A handler holding an event of revision rev that
// another handler of the process has moved past decides on what the process already knows,
// rather than decoding the event it holds and then the newer one (docs/scale.md, "Ninth pass").
func (m *SnapshotMemo) Newer(cluster string, rev int64) *Snapshot {
	m.mu.Lock()
	s := m.newest[cluster]
	m.mu.Unlock()
	if s == nil || s.Revision <= rev {
		return nil
	}
	return s.DeepCopy()
}

// noteNewest keeps s as its cluster's newest when it is of a higher revision than the one kept,
// or of the same revision and a later time (the agent's tick of an unchanged cluster).
func (m *SnapshotMemo) noteNewest(s *Snapshot) {
	if s == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur := m.newest[s.Cluster]; cur == nil || s.Revision > cur.Revision || s.Revision == cur.Revision && s.Time.After(cur.Time.Time) {
		m.newest[s.Cluster] = s
	}
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
