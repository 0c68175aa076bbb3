package azureblob_test

// The claim-check store and the dead letters against Azurite (the Azure Storage emulator, real
// Blob REST protocol) through the real azblob SDK.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"

	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/shared/queue/azureblob"
	"github.com/dovetail-dev/dovetail/shared/queue/azureblob/azuritetest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	azuritetest.StopShared()
	os.Exit(code)
}

// snapshot builds a cluster-shaped snapshot: nodes with their labels and allocatable and pods
// with seeded random-looking UIDs and names (so compression is not flattered by repetition).
func snapshot(nodes, podsPerNode int) *events.Snapshot {
	rng := rand.New(rand.NewPCG(7, 11))
	uid := func() types.UID {
		return types.UID(fmt.Sprintf("%08x-%04x-%04x-%04x-%012x", rng.Uint32(), rng.Uint32()&0xffff, rng.Uint32()&0xffff, rng.Uint32()&0xffff, rng.Uint64()&0xffffffffffff))
	}
	s := &events.Snapshot{SchemaVersion: events.SnapshotSchemaVersion, Cluster: "aks1", Revision: 7, Time: metav1.NewTime(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))}
	for n := range nodes {
		name := fmt.Sprintf("aks-default-%05d", n)
		s.Nodes = append(s.Nodes, corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, UID: uid(), Labels: map[string]string{
				"topology.kubernetes.io/zone": fmt.Sprintf("eastus-%d", n%3+1), "node.kubernetes.io/instance-type": "Standard_D4s_v5"}},
			Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3860m"), corev1.ResourceMemory: resource.MustParse("12699908Ki")}},
		})
		for p := range podsPerNode {
			s.Pods = append(s.Pods, corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("app-%d-%x", p, rng.Uint64()), Namespace: "default", UID: uid(), Labels: map[string]string{"app": fmt.Sprint("app-", p)}},
				Spec: corev1.PodSpec{NodeName: name, Containers: []corev1.Container{{Name: "main", Image: "example.azurecr.io/app:v1",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(fmt.Sprintf("%dm", 100+rng.IntN(900)))}}}}},
				Status: corev1.PodStatus{Phase: corev1.PodRunning},
			})
		}
	}
	return s
}

// A snapshot too large for an Event Grid event travels by claim check: the event carries the
// blob's URL and digest, and the consumer reads back the same snapshot.
func TestClaimCheckedSnapshotRoundTrip(t *testing.T) {
	a := azuritetest.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	store := &azureblob.Store{Container: a.Container(ctx, t, "claims")}
	codec := events.Codec{Blobs: store}
	snap := snapshot(2000, 15) // 2,000 nodes, 30,000 pods
	raw, err := codec.NewEvent(ctx, "aks1", "agent", events.TypeSnapshot, "snap-7", snap)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) > 16<<10 {
		t.Fatalf("event is %d bytes; a claim-checked event carries only the reference", len(raw))
	}
	env, err := events.Decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	wantPrefix := a.BlobEndpoint + "/claims/" + azureblob.DefaultPrefix + "aks1/"
	if !strings.HasPrefix(env.DataRef, wantPrefix) || !strings.HasSuffix(env.DataRef, ".json.zst") {
		t.Fatalf("dataref %q, want under %s", env.DataRef, wantPrefix)
	}
	blob, err := store.Get(ctx, env.DataRef)
	if err != nil {
		t.Fatal(err)
	}
	if size := len(blob); size <= events.DefaultMaxInlineBytes*3/4 {
		t.Fatalf("compressed snapshot is %d bytes; the test wants one above the inline limit", size)
	}
	got, err := codec.Snapshot(ctx, env)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Nodes) != 2000 || len(got.Pods) != 30000 || got.Pods[29999].UID != snap.Pods[29999].UID {
		t.Fatalf("round trip: %d nodes, %d pods", len(got.Nodes), len(got.Pods))
	}
	t.Logf("claim-checked snapshot: 2,000 nodes, 30,000 pods, %d bytes compressed in %s; event %d bytes", len(blob), env.DataRef, len(raw))
}

// A reference outside the store, a blob that is gone, and a blob above events.MaxBlobBytes are
// all malformed (poison) for the codec, and the large one is refused before its body is read.
func TestGetRefusals(t *testing.T) {
	a := azuritetest.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := a.Container(ctx, t, "refusals")
	store := &azureblob.Store{Container: c}
	for _, uri := range []string{
		"https://evil.blob.core.windows.net/claims/claim-check/x.json.zst",
		a.BlobEndpoint + "/refusals/other-prefix/x.json.zst",
		a.BlobEndpoint + "/refusals/claim-check/../x.json.zst",
		store.URI("aks1/missing.json.zst"),
	} {
		if _, err := store.Get(ctx, uri); !errors.Is(err, events.ErrBlobNotFound) {
			t.Errorf("Get(%s) = %v, want ErrBlobNotFound", uri, err)
		}
	}
	// One byte over the bound, staged as one block so the test does not hold it twice.
	big := bytes.Repeat([]byte{'x'}, events.MaxBlobBytes+1)
	bb := c.NewBlockBlobClient(azureblob.DefaultPrefix + "aks1/big.json.zst")
	if _, err := bb.UploadBuffer(ctx, big, &blockblob.UploadBufferOptions{BlockSize: events.MaxBlobBytes + 1}); err != nil {
		t.Fatal(err)
	}
	big = nil
	_, err := store.Get(ctx, store.URI("aks1/big.json.zst"))
	if !errors.Is(err, events.ErrBlobTooLarge) {
		t.Fatalf("Get(big) = %v, want ErrBlobTooLarge", err)
	}
	env := events.Envelope{ID: "e1", DataRef: store.URI("aks1/big.json.zst"), DataDigest: "sha256:00"}
	if _, err := (events.Codec{Blobs: store}).Payload(ctx, env); !errors.Is(err, events.ErrMalformed) {
		t.Fatalf("Payload(big ref) = %v, want ErrMalformed", err)
	}
}

// A dead letter is one JSON blob named from its event: written twice, stored once; the reason is
// cut at MaxReasonBytes and a non-JSON event kept as text.
func TestDeadLetters(t *testing.T) {
	a := azuritetest.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := a.Container(ctx, t, "deadletters")
	w := &azureblob.DeadLetters{Container: c}
	d := azureblob.DeadLetter{Reason: "poison message: malformed event: type: \"x\" " + strings.Repeat("é", 600), DeliveryAttempts: 1,
		Source: "provision", EventID: "pods-pending-9", Time: time.Date(2026, 3, 1, 12, 0, 0, 0, time.FixedZone("x", 3600)),
		Event: json.RawMessage(`{not json`)}
	for range 2 {
		if err := w.WriteDeadLetter(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	pager := c.NewListBlobsFlatPager(nil)
	var names []string
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range page.Segment.BlobItems {
			names = append(names, *b.Name)
		}
	}
	// sha256("pods-pending-9"), computed with sha256sum.
	want := "dovetail/provision/" + "1697c319bd9e27cb72d0a13fe4ebbe52ff992c7a3d4420cbb90514400f1ff94d" + ".json"
	if len(names) != 1 || names[0] != want || w.Name(d) != want {
		t.Fatalf("blobs %v, want one named %s", names, want)
	}
	resp, err := c.NewBlobClient(names[0]).DownloadStream(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var got azureblob.DeadLetter
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Reason) > azureblob.MaxReasonBytes || !strings.HasPrefix(got.Reason, "poison message: malformed event") ||
		got.EventText != "{not json" || got.Event != nil || got.DeliveryAttempts != 1 || !got.Time.Equal(d.Time) || got.Time.Location() != time.UTC {
		t.Fatalf("dead letter read back: %+v", got)
	}
}
