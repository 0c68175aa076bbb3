package scheduledevents

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"

	"github.com/dovetail-dev/dovetail/events/notices"
	"github.com/dovetail-dev/dovetail/shared/queue"
)

// imds stands in for the Instance Metadata Service (nothing real answers offline): it serves the
// current document and, as IMDS does, refuses a request without the Metadata header (400).
type imds struct {
	mu  sync.Mutex
	doc []byte
}

func (s *imds) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Metadata") != "true" {
		http.Error(w, `{"error":"Bad request. Required metadata header not specified"}`, http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
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
	p := &Poller{URL: ts.URL + "/metadata/scheduledevents?api-version=2020-07-01", Publisher: pub, Cluster: "dev"}
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
	if len(pub.msgs) != 1 || pub.msgs[0].Subject != queue.NoticesSubject("dev") || string(pub.msgs[0].Data) != string(srv.doc) {
		t.Fatalf("published %+v, want the Preempt document once on %s", pub.msgs, queue.NoticesSubject("dev"))
	}
	ns, err := notices.Decode(pub.msgs[0].Data)
	if err != nil || len(ns) != 1 || ns[0].Kind != notices.KindPreemption || ns[0].InstanceIDs[0] != "myspotvm" {
		t.Fatalf("published document decodes to %+v, %v", ns, err)
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
