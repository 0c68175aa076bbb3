// Package azfunctest is a mock at the edge for tests: the Azure Functions host's Event Grid
// trigger in front of a custom handler, because the Functions host does not run offline. It takes
// Event Grid's push deliveries (a CloudEvents batch POSTed with Content-Type
// application/cloudevents-batch+json) and invokes the custom handler as the host does: one
// POST /<function> per event with the documented request payload {"Data": {"event": <event>},
// "Metadata": {…}}; the delivery fails (500, so Event Grid delivers the whole batch again) when
// any invocation answered other than 2xx, and succeeds (202) otherwise.
package azfunctest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"time"
)

// Host is the mock host of one function.
type Host struct {
	*httptest.Server
	// HandlerURL is the custom handler's base URL (http://127.0.0.1:<FUNCTIONS_CUSTOMHANDLER_PORT>).
	HandlerURL string
	Function   string
	Binding    string

	seq     atomic.Int64
	mu      sync.Mutex
	results []Invocation
}

// Invocation is one call of the custom handler and its answer.
type Invocation struct {
	EventID string
	Status  int
	Logs    []string
}

// NewHost starts the host on loopback; binding is the trigger binding's name ("event").
func NewHost(handlerURL, function, binding string) *Host {
	h := &Host{HandlerURL: handlerURL, Function: function, Binding: binding}
	h.Server = httptest.NewServer(http.HandlerFunc(h.deliver))
	return h
}

// Invocations returns every invocation so far, in order.
func (h *Host) Invocations() []Invocation {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Invocation(nil), h.results...)
}

func (h *Host) deliver(w http.ResponseWriter, r *http.Request) {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); r.Method != http.MethodPost || mt != "application/cloudevents-batch+json" {
		http.Error(w, "want a POST of application/cloudevents-batch+json", http.StatusBadRequest)
		return
	}
	var batch []json.RawMessage
	if err := json.NewDecoder(r.Body).Decode(&batch); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	failed := 0
	for _, ev := range batch {
		inv := h.invoke(ev)
		h.mu.Lock()
		h.results = append(h.results, inv)
		h.mu.Unlock()
		if inv.Status < 200 || inv.Status > 299 {
			failed++
		}
	}
	if failed > 0 {
		http.Error(w, fmt.Sprintf("%d of %d invocations failed", failed, len(batch)), http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

func (h *Host) invoke(ev json.RawMessage) Invocation {
	var head struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(ev, &head)
	id := fmt.Sprintf("00000000-0000-4000-8000-%012d", h.seq.Add(1))
	body, _ := json.Marshal(map[string]any{
		"Data": map[string]json.RawMessage{h.Binding: ev},
		"Metadata": map[string]any{"InvocationId": id,
			"sys": map[string]any{"MethodName": h.Function, "UtcNow": time.Now().UTC().Format(time.RFC3339Nano), "RandGuid": id}},
	})
	req, _ := http.NewRequest(http.MethodPost, h.HandlerURL+"/"+h.Function, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Azure-Functions-InvocationId", id)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return Invocation{EventID: head.ID, Status: 0, Logs: []string{err.Error()}}
	}
	defer resp.Body.Close()
	var out struct{ Logs []string }
	b, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(b, &out)
	return Invocation{EventID: head.ID, Status: resp.StatusCode, Logs: out.Logs}
}
