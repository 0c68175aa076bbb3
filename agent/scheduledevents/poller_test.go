package scheduledevents

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/dovetail-dev/dovetail/events/notices"
	"github.com/dovetail-dev/dovetail/shared/queue"
)

// imds stands in for the Instance Metadata Service (nothing real answers offline): it serves the
// current document and, as IMDS does, refuses a request without the Metadata header (400).
type imds struct {
	mu      sync.Mutex
	doc     []byte
	idReads int
}

// vmID is the resource ID the stand-in IMDS reports for its VM.
const vmID = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/MC_rg_dev_eastus/providers/Microsoft.Compute/virtualMachines/myspotvm"

func (s *imds) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Metadata") != "true" {
		http.Error(w, `{"error":"Bad request. Required metadata header not specified"}`, http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.URL.Path == "/metadata/instance/compute/resourceId" {
		// format=text answers the value as plain text (Azure "Azure Instance Metadata Service").
		s.idReads++
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte(vmID))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(s.doc)
}

type capture struct{ msgs []queue.Message }

func (c *capture) Publish(_ context.Context, subject, id string, data []byte) error {
	c.msgs = append(c.msgs, queue.Message{Subject: subject, ID: id, Data: data})
	return nil
}

func read(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("../../events/notices/testdata/azure/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestPollerPublishesNewDocuments: an empty document publishes nothing; the recorded Preempt
// document is published once on the notices subject, whole, and decodes as a preemption; a new
// incarnation is published again.
func TestPollerPublishesNewDocuments(t *testing.T) {
	srv := &imds{doc: read(t, "scheduled_events_empty.json")}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	pub := &capture{}
	p := &Poller{URL: ts.URL + "/metadata/scheduledevents?api-version=2020-07-01", ComputeURL: ts.URL + "/metadata/instance/compute/resourceId?api-version=2021-02-01&format=text",
		Publisher: pub, Cluster: "dev"}
	ctx := context.Background()
	if ok, err := p.Poll(ctx); err != nil || ok {
		t.Fatalf("empty document: published %v, %v", ok, err)
	}
	srv.doc = read(t, "scheduled_events_preempt_spot.json")
	for i := 0; i < 3; i++ {
		if _, err := p.Poll(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if len(pub.msgs) != 1 || pub.msgs[0].Subject != queue.NoticesSubject("dev") {
		t.Fatalf("published %+v, want the Preempt document once on %s", pub.msgs, queue.NoticesSubject("dev"))
	}
	var ce struct {
		Subject    string `json:"subject"`
		DataBase64 []byte `json:"data_base64"` // how the CloudEvents SDK writes bytes
	}
	if err := json.Unmarshal(pub.msgs[0].Data, &ce); err != nil || ce.Subject != vmID || string(ce.DataBase64) != string(srv.doc) {
		t.Fatalf("published %s (%v), want the document whole with subject %s", pub.msgs[0].Data, err, vmID)
	}
	// The document's VM name becomes the resource ID in this VM's resource group.
	ns, err := notices.Decode(pub.msgs[0].Data)
	if err != nil || len(ns) != 1 || ns[0].Kind != notices.KindPreemption || len(ns[0].ResourceIDs) != 1 || ns[0].ResourceIDs[0] != vmID {
		t.Fatalf("published document decodes to %+v, %v", ns, err)
	}
	if srv.idReads != 1 {
		t.Errorf("the VM's resource ID was read %d times, want once", srv.idReads)
	}
	srv.doc = read(t, "scheduled_events_freeze_live_migration_scheduled.json")
	if ok, err := p.Poll(ctx); err != nil || !ok || len(pub.msgs) != 2 {
		t.Fatalf("a new document: published %v, %v (%d)", ok, err, len(pub.msgs))
	}
	// Without the header IMDS answers 400, which is an error, not an empty document.
	if _, err := (&Poller{URL: ts.URL, Client: &http.Client{Transport: stripHeader{}}, Publisher: pub, Cluster: "dev"}).Poll(ctx); err == nil {
		t.Error("a 400 from IMDS was not an error")
	}
}

type stripHeader struct{}

func (stripHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Del("Metadata")
	return http.DefaultTransport.RoundTrip(r)
}

// An IMDS that does not answer a VM's resource ID publishes nothing: without it the document's
// names could be any VM's.
func TestPollerNeedsTheVMResourceID(t *testing.T) {
	srv := &imds{doc: read(t, "scheduled_events_preempt_spot.json")}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	pub := &capture{}
	for name, compute := range map[string]string{
		"not found":   ts.URL + "/metadata/instance/compute/nothing",
		"not a VM id": ts.URL + "/metadata/scheduledevents", // answers the document
	} {
		p := &Poller{URL: ts.URL + "/metadata/scheduledevents", ComputeURL: compute, Publisher: pub, Cluster: "dev"}
		if ok, err := p.Poll(context.Background()); ok || err == nil || !strings.Contains(err.Error(), "resource ID") {
			t.Errorf("%s: published %v, %v; want an error naming the resource ID", name, ok, err)
		}
	}
	if len(pub.msgs) != 0 {
		t.Errorf("published %d messages", len(pub.msgs))
	}
}
