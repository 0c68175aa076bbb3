package kube

import (
	"sync"
)

// maxTombstones bounds how many deleted objects the revision map remembers; older ones are
// forgotten and answered conservatively (see ChangedSince).
const maxTombstones = 10000

// Revisions counts observed changes. Every informer event (add, update, delete) bumps the counter
// and records, per object, the revision of its last change, so a command made from the snapshot
// at revision R can ask whether its targets changed after R.
//
// The counter starts at a base taken from the clock at start-up (Unix nanoseconds) so revisions
// keep increasing across agent restarts as long as fewer events than nanoseconds elapse; a
// revision older than the base (made before this process started) or newer than the current one
// has no known history and every question about it is answered "changed".
type Revisions struct {
	mu      sync.Mutex
	base    int64
	current int64
	// bumps counts the events recorded since the tracker was made; Advance does not reset it.
	bumps   int64
	changed map[string]int64
	// created is, per object, the revision of its last add event (a re-created name shows here).
	created map[string]int64
	// nodePods is, per node name, the revision at which a pod last became bound to it.
	nodePods map[string]int64
	// kinds is, per kind, the revision of its last change; deletes is, per kind, of its last delete.
	kinds, deletes map[string]int64
	// tombstones are deleted objects' keys in deletion order, pruned beyond maxTombstones.
	tombstones []string
	// gone holds the keys of tombstones not re-created since.
	gone map[string]bool
	// forgottenBelow: keys pruned from the map changed at revisions below or at this one.
	forgottenBelow int64
}

// NewRevisions returns a tracker whose first revision is base.
func NewRevisions(base int64) *Revisions {
	return &Revisions{base: base, current: base, forgottenBelow: base, changed: map[string]int64{}, created: map[string]int64{}, nodePods: map[string]int64{},
		kinds: map[string]int64{}, deletes: map[string]int64{}, gone: map[string]bool{}}
}

// Current returns the latest revision.
func (r *Revisions) Current() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.current
}

// Notice records that the latest update of an object of kind matters to LastChange's readers
// (adds and deletes always do; the watcher decides for updates, so a kubelet's heartbeat does
// not count as a change).
func (r *Revisions) Notice(kind string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.kinds[kind] = r.current
}

// LastChange returns the revision of the latest add, delete or noticed update of an object of
// kind (the base when none was seen).
func (r *Revisions) LastChange(kind string) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return max(r.kinds[kind], r.base)
}

// LastDelete returns the revision of the latest delete of an object of kind (the base when none
// was seen).
func (r *Revisions) LastDelete(kind string) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return max(r.deletes[kind], r.base)
}

// Bumps returns how many informer events the tracker has recorded since it was made. Unlike
// Current − Base it survives Advance, which a leader calls once it holds the Lease, possibly
// after its informers have already handled events: a count of events handled must not restart.
func (r *Revisions) Bumps() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.bumps
}

// Base returns the revision the tracker started at, or was last advanced to (Advance).
func (r *Revisions) Base() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.base
}

// Advance restarts the tracker's history at a new base: the larger of from and the current
// revision + 1, which it returns. Revisions at or below the old current one (made before, by this
// process or by an earlier leader whose revisions ended below from) become unknown, so
// ChangedSince, CreatedSince and NodePodsChangedSince answer "changed" for them, and every later
// revision is at or above from. What happened before stays recorded at its old revision, below
// the new base, so a question about a revision at or above it sees no change from then.
func (r *Revisions) Advance(from int64) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.base = max(from, r.current+1)
	r.current = r.base
	return r.base
}

func objectKey(kind, key string) string { return kind + "/" + key }

// Op is the kind of change an informer event reports.
type Op int

// Ops.
const (
	OpAdd Op = iota
	OpUpdate
	OpDelete
)

// Bump records a change of object key ("namespace/name", or "name" when cluster-scoped) of kind
// and returns the new revision.
func (r *Revisions) Bump(kind, key string, op Op) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.current++
	r.bumps++
	k := objectKey(kind, key)
	r.changed[k] = r.current
	if op != OpUpdate {
		r.kinds[kind] = r.current
	}
	switch op {
	case OpAdd:
		r.created[k] = r.current
		delete(r.gone, k)
	case OpDelete:
		r.deletes[kind] = r.current
		delete(r.created, k)
		r.gone[k] = true
		r.tombstones = append(r.tombstones, k)
		if len(r.tombstones) > maxTombstones {
			r.pruneLocked(len(r.tombstones) / 2)
		}
	}
	return r.current
}

// pruneLocked forgets the n oldest tombstones (unless the key was re-created since).
func (r *Revisions) pruneLocked(n int) {
	for _, k := range r.tombstones[:n] {
		if rev, ok := r.changed[k]; ok {
			if rev > r.forgottenBelow {
				r.forgottenBelow = rev
			}
			delete(r.changed, k)
		}
		delete(r.created, k)
		delete(r.gone, k)
	}
	r.tombstones = append([]string(nil), r.tombstones[n:]...)
}

// CreatedSince reports whether the object was added after revision rev: a name that now refers
// to a different object than the snapshot saw (node names are reused). Unknown revisions answer
// true.
func (r *Revisions) CreatedSince(kind, key string, rev int64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.knownLocked(rev) {
		return true
	}
	return r.created[objectKey(kind, key)] > rev
}

// Deleted reports whether this tracker saw the object deleted and not added again since (among
// the last maxTombstones deletes).
func (r *Revisions) Deleted(kind, key string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.gone[objectKey(kind, key)]
}

// PodBound records that a pod became bound to node at revision rev.
func (r *Revisions) PodBound(node string, rev int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rev > r.nodePods[node] {
		r.nodePods[node] = rev
	}
}

// known reports whether rev falls within the history this tracker holds.
func (r *Revisions) knownLocked(rev int64) bool { return rev >= r.base && rev <= r.current }

// ChangedSince reports whether the object (kind, "namespace/name" or "name") was added, updated
// or deleted after revision rev. Unknown revisions (before the tracker's base, or newer than the
// current one) answer true: without history, assume change.
func (r *Revisions) ChangedSince(kind, key string, rev int64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.knownLocked(rev) {
		return true
	}
	if last, ok := r.changed[objectKey(kind, key)]; ok {
		return last > rev
	}
	// Never seen since base, or seen and forgotten: forgotten keys changed at or before
	// forgottenBelow, so only a revision older than that is in doubt.
	return rev < r.forgottenBelow
}

// NodePodsChangedSince reports whether a pod that counts for disruption (not a DaemonSet or mirror
// pod, not terminal) became bound to node after revision rev; unknown revisions answer true.
func (r *Revisions) NodePodsChangedSince(node string, rev int64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.knownLocked(rev) {
		return true
	}
	return r.nodePods[node] > rev
}
