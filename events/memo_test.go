package events

import (
	"bytes"
	"context"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/randfill"
)

// filledSnapshot is a snapshot whose every field, to a depth of 8, holds values: randfill with no
// nils and one or two elements per slice and map.
func filledSnapshot(t *testing.T) *Snapshot {
	t.Helper()
	s := &Snapshot{}
	randfill.NewWithSeed(7).NilChance(0).NumElements(1, 2).MaxDepth(8).Fill(s)
	v := reflect.ValueOf(s).Elem()
	for i := range v.NumField() {
		if v.Field(i).Kind() != reflect.Bool && v.Field(i).IsZero() {
			t.Fatalf("the filled snapshot's %s is empty: the test would not check it", v.Type().Field(i).Name)
		}
	}
	return s
}

// shared returns the path of the first slice, map or pointer that a and b (the same type) both
// reach at the same address, or "".
func shared(a, b reflect.Value, path string) string {
	switch a.Kind() {
	case reflect.Pointer:
		if a.IsNil() || b.IsNil() {
			return ""
		}
		if a.Pointer() == b.Pointer() {
			return path
		}
		return shared(a.Elem(), b.Elem(), path)
	case reflect.Slice:
		if a.Len() == 0 || b.Len() == 0 {
			return ""
		}
		if a.Pointer() == b.Pointer() {
			return path
		}
		for i := range min(a.Len(), b.Len()) {
			if p := shared(a.Index(i), b.Index(i), path+"[]"); p != "" {
				return p
			}
		}
	case reflect.Map:
		if a.Len() == 0 || b.Len() == 0 {
			return ""
		}
		if a.Pointer() == b.Pointer() {
			return path
		}
		for _, k := range a.MapKeys() {
			if bv := b.MapIndex(k); bv.IsValid() {
				if p := shared(a.MapIndex(k), bv, path+"{}"); p != "" {
					return p
				}
			}
		}
	case reflect.Struct:
		if a.Type() == reflect.TypeFor[time.Time]() {
			return "" // a value: its *Location is immutable and shared by design
		}
		for i := range a.NumField() {
			if p := shared(a.Field(i), b.Field(i), path+"."+a.Type().Field(i).Name); p != "" {
				return p
			}
		}
	case reflect.Interface:
		if !a.IsNil() && !b.IsNil() {
			return shared(a.Elem(), b.Elem(), path)
		}
	}
	return ""
}

func TestSnapshotDeepCopySharesNothing(t *testing.T) {
	s := filledSnapshot(t)
	c := s.DeepCopy()
	if !equality.Semantic.DeepEqual(s, c) {
		t.Fatal("the copy differs from the snapshot")
	}
	if p := shared(reflect.ValueOf(s), reflect.ValueOf(c), "Snapshot"); p != "" {
		t.Errorf("the copy shares %s with the snapshot", p)
	}
	if (*Snapshot)(nil).DeepCopy() != nil {
		t.Error("a nil snapshot's copy is not nil")
	}
}

func TestSnapshotMemoDecodesEachPayloadOnce(t *testing.T) {
	m := NewSnapshotMemo(2)
	a, b := testSnapshot(3, 2, 4), testSnapshot(2, 1, 1)
	b.Revision = 43
	encA, err := EncodeSnapshot(a)
	if err != nil {
		t.Fatal(err)
	}
	encB, err := EncodeSnapshot(b)
	if err != nil {
		t.Fatal(err)
	}

	// Eight callers of one payload at once: one decode, eight snapshots sharing nothing.
	got := make([]*Snapshot, 8)
	var wg sync.WaitGroup
	for i := range got {
		wg.Go(func() {
			s, err := m.Decode(encA)
			if err != nil {
				t.Error(err)
			}
			got[i] = s
		})
	}
	wg.Wait()
	if n := m.decodes.Load(); n != 1 {
		t.Errorf("decodes = %d for one payload, want 1", n)
	}
	for i, s := range got[1:] {
		if p := shared(reflect.ValueOf(got[0]), reflect.ValueOf(s), "Snapshot"); p != "" {
			t.Fatalf("callers 0 and %d share %s", i+1, p)
		}
	}

	// A caller's change stays its own.
	got[0].PendingPods[0].Name = "changed"
	got[0].Nodes = nil
	again, err := m.Decode(encA)
	if err != nil {
		t.Fatal(err)
	}
	if again.PendingPods[0].Name != a.PendingPods[0].Name || len(again.Nodes) != 3 {
		t.Errorf("a later caller saw another's changes: pod %q, %d nodes", again.PendingPods[0].Name, len(again.Nodes))
	}

	// Size 2: a, b, then c evicts a (the least recently used), so a decodes again.
	c := testSnapshot(1, 1, 1)
	c.Revision = 44
	encC, _ := EncodeSnapshot(c)
	for _, enc := range [][]byte{encB, encC, encA} {
		if _, err := m.Decode(enc); err != nil {
			t.Fatal(err)
		}
	}
	if n := m.decodes.Load(); n != 4 {
		t.Errorf("decodes = %d after a, b, c, a in a memo of 2, want 4", n)
	}
}

func TestSnapshotMemoDoesNotRememberErrors(t *testing.T) {
	m := NewSnapshotMemo(2)
	for range 2 {
		if _, err := m.Decode([]byte("not zstd")); err == nil {
			t.Fatal("a payload that is not a snapshot decoded")
		}
	}
	if n := m.decodes.Load(); n != 2 {
		t.Errorf("decodes = %d for a bad payload twice, want 2 (errors are not remembered)", n)
	}
	if n := m.entries.Len(); n != 0 {
		t.Errorf("%d entries kept after errors, want 0", n)
	}
}

// zstdJSON compresses doc as EncodeSnapshot would.
func zstdJSON(doc string) []byte { return zenc.EncodeAll([]byte(doc), nil) }

func TestPeekRevision(t *testing.T) {
	enc, err := EncodeSnapshot(testSnapshot(2, 2, 2))
	if err != nil {
		t.Fatal(err)
	}
	if rev, ok := PeekRevision(enc); !ok || rev != 42 {
		t.Errorf("PeekRevision(EncodeSnapshot of revision 42) = %d, %v", rev, ok)
	}
	for _, c := range []struct {
		name string
		data []byte
	}{
		{"not zstd", []byte(`{"revision":7}`)},
		{"not an object", zstdJSON(`[{"revision":7}]`)},
		{"the revision after a composite field", zstdJSON(`{"cluster":"c","nodes":[],"revision":7}`)},
		{"no revision", zstdJSON(`{"schemaVersion":1,"cluster":"c"}`)},
		{"a revision that is not a number", zstdJSON(`{"revision":"7"}`)},
		// Decompresses to 64 MiB of one string: the peek reads peekBytes of it and gives up.
		{"a huge leading string", zstdJSON(`{"cluster":"` + strings.Repeat("a", 64<<20) + `","revision":7}`)},
	} {
		if rev, ok := PeekRevision(c.data); ok {
			t.Errorf("%s: PeekRevision = %d, true; want not ok", c.name, rev)
		}
	}
}

func TestReadLatestSnapshotAfterDecodesOnlyANewerOne(t *testing.T) {
	ctx := context.Background()
	store := &MemoryBlobStore{}
	if got, err := ReadLatestSnapshotAfter(ctx, store, "prod", 0); got != nil || err != nil {
		t.Fatalf("nothing stored: got %v, %v; want nil, nil", got, err)
	}
	s := testSnapshot(2, 2, 2) // revision 42
	enc, err := EncodeSnapshot(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := PutLatestSnapshot(ctx, store, "prod", enc); err != nil {
		t.Fatal(err)
	}
	before := Snapshots.decodes.Load()
	for _, after := range []int64{42, 43} {
		if got, err := ReadLatestSnapshotAfter(ctx, store, "prod", after); got != nil || err != nil {
			t.Errorf("after %d: got revision %v, %v; want nil, nil (the latest, 42, is not newer)", after, got, err)
		}
	}
	if n := Snapshots.decodes.Load() - before; n != 0 {
		t.Errorf("%d decodes to learn the latest is not newer, want 0", n)
	}
	got, err := ReadLatestSnapshotAfter(ctx, store, "prod", 41)
	if err != nil || got == nil || got.Revision != 42 {
		t.Fatalf("after 41: got %v, %v; want revision 42", got, err)
	}
	if _, err := ReadLatestSnapshotAfter(ctx, store, "other", 0); err != nil {
		t.Errorf("another cluster's key, nothing stored: %v", err)
	}
}

// A pods-pending event carries a whole snapshot and every function of a process accepts it, so
// its payload is decoded once too; a payload read as the other type is decoded as that type.
func TestSnapshotMemoDecodesPodsPendingOnce(t *testing.T) {
	m := NewSnapshotMemo(4)
	s := testSnapshot(2, 1, 3)
	p := &PodsPending{Pods: []string{s.PendingPods[0].Namespace + "/" + s.PendingPods[0].Name}, Snapshot: s}
	enc, err := EncodePodsPending(p)
	if err != nil {
		t.Fatal(err)
	}
	a, err := m.DecodePodsPending(enc)
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.DecodePodsPending(enc)
	if err != nil {
		t.Fatal(err)
	}
	if n := m.decodes.Load(); n != 1 {
		t.Errorf("decodes = %d for one pods-pending payload read twice, want 1", n)
	}
	if !equality.Semantic.DeepEqual(a, b) || len(a.Snapshot.PendingPods) != 3 || a.Pods[0] != p.Pods[0] {
		t.Fatalf("the two reads differ or lost the payload: %d pending pods, pods %v", len(a.Snapshot.PendingPods), a.Pods)
	}
	if path := shared(reflect.ValueOf(a), reflect.ValueOf(b), "PodsPending"); path != "" {
		t.Errorf("two callers share %s", path)
	}

	// The same bytes read as a snapshot are decoded as one (and refused: a pods-pending payload
	// has no schemaVersion at its top), not served the pods-pending value.
	if _, err := m.Decode(enc); err == nil {
		t.Error("a pods-pending payload decoded as a snapshot")
	}
	if n := m.decodes.Load(); n != 2 {
		t.Errorf("decodes = %d after reading the payload as a snapshot, want 2", n)
	}
}

func TestPodsPendingDeepCopySharesNothing(t *testing.T) {
	p := &PodsPending{Pods: []string{"a/b", "c/d"}, Snapshot: filledSnapshot(t)}
	c := p.DeepCopy()
	if !equality.Semantic.DeepEqual(p, c) {
		t.Fatal("the copy differs")
	}
	if path := shared(reflect.ValueOf(p), reflect.ValueOf(c), "PodsPending"); path != "" {
		t.Errorf("the copy shares %s", path)
	}
	if (*PodsPending)(nil).DeepCopy() != nil {
		t.Error("a nil payload's copy is not nil")
	}
}

// The agent's one-marshal encoder of a pods-pending batch and its latest snapshot gives the bytes
// of the two encoders it stands for, and refuses what EncodePodsPending refuses.
func TestEncodeSnapshotWithPodsIsBothEncodings(t *testing.T) {
	s := testSnapshot(3, 2, 4)
	s.SchemaVersion = 0 // written as the current version, by all three
	pods := []string{s.PendingPods[1].Namespace + "/" + s.PendingPods[1].Name, s.PendingPods[3].Namespace + "/" + s.PendingPods[3].Name}
	snap, pp, err := EncodeSnapshotWithPods(s, pods)
	if err != nil {
		t.Fatal(err)
	}
	wantSnap, err := EncodeSnapshot(s)
	if err != nil {
		t.Fatal(err)
	}
	wantPP, err := EncodePodsPending(&PodsPending{Pods: pods, Snapshot: s})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(snap, wantSnap) {
		t.Error("the snapshot differs from EncodeSnapshot's")
	}
	if !bytes.Equal(pp, wantPP) {
		t.Error("the pods-pending payload differs from EncodePodsPending's")
	}
	if s.SchemaVersion != 0 {
		t.Error("the snapshot given was modified")
	}
	if _, _, err := EncodeSnapshotWithPods(s, []string{"default/not-pending"}); err == nil || !strings.Contains(err.Error(), "podsPending.pods[0]") {
		t.Errorf("a pod not among the pending ones: err = %v, want one naming podsPending.pods[0]", err)
	}
	if _, _, err := EncodeSnapshotWithPods(nil, pods); err == nil {
		t.Error("a nil snapshot encoded")
	}
}
