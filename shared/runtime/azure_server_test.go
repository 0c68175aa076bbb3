//go:build !lambda.norpc

package runtime

// The custom handler's server is bounded: a stalled request body never holds the instance's
// one-at-a-time turn and is cut off at the handler's read deadline; an idle keep-alive
// connection is closed. Asserted by what the connections see, not by timing the code.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dovetail-dev/dovetail/shared/queue"
)

// serveAzure serves the handler with the production timeouts, idle shortened to idle; active
// receives once per request a connection starts reading.
func serveAzure(t *testing.T, h queue.Handler, read, idle time.Duration) (addr string, active chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	to := azureTimeouts
	to.idle = idle
	srv := to.server(AzureFunctionsHandler(h, AzureOptions{Routes: map[string]string{"provision": "s"}, ReadTimeout: read}))
	active = make(chan struct{}, 16)
	srv.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateActive {
			active <- struct{}{}
		}
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String(), active
}

// stall opens a connection that sends an invocation's headers and one byte of its 1000-byte body.
func stall(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, "POST /provision HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"); err != nil {
		t.Fatal(err)
	}
	return c
}

func invocation(id string) []byte {
	b, _ := json.Marshal(map[string]any{"Data": map[string]any{DefaultTriggerBinding: map[string]any{"specversion": "1.0", "id": id}}, "Metadata": map[string]any{}})
	return b
}

func TestAzureStalledBodyDoesNotHoldTheTurn(t *testing.T) {
	var handled atomic.Int32
	h := func(context.Context, queue.Message) error { handled.Add(1); return nil }
	addr, active := serveAzure(t, h, time.Hour, time.Hour) // the stalled body is never cut off here
	stall(t, addr)
	select { // the stalled request is being read before the next one comes
	case <-active:
	case <-time.After(20 * time.Second):
		t.Fatal("the stalled request never reached the server")
	}
	// Before, the handler took the turn and then read the body: this invocation waited for ever.
	client := &http.Client{Timeout: 20 * time.Second}
	resp, err := client.Post("http://"+addr+"/provision", "application/json", bytes.NewReader(invocation("e1")))
	if err != nil {
		t.Fatalf("an invocation behind a stalled body: %v, want it served", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || handled.Load() != 1 {
		t.Errorf("status %d, %d handled, want 200 and 1", resp.StatusCode, handled.Load())
	}
}

func TestAzureStalledBodyIsCutOff(t *testing.T) {
	var handled atomic.Int32
	h := func(context.Context, queue.Message) error { handled.Add(1); return nil }
	addr, _ := serveAzure(t, h, 50*time.Millisecond, time.Hour)
	c := stall(t, addr)
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second)) // the test's own bound, far above 50 ms
	r := bufio.NewReader(c)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatalf("stalled body: %v, want the server to answer and close", err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "reading the invocation") {
		t.Errorf("stalled body: %d %q, want 400 naming the read", resp.StatusCode, body)
	}
	if _, err := r.ReadByte(); !errors.Is(err, io.EOF) {
		t.Errorf("after the answer: %v, want the connection closed (EOF)", err)
	}
	if handled.Load() != 0 {
		t.Errorf("%d invocations handled, want none (nothing was read; not dead-lettered either)", handled.Load())
	}
}

func TestAzureIdleConnectionIsClosed(t *testing.T) {
	addr, _ := serveAzure(t, func(context.Context, queue.Message) error { return nil }, time.Hour, 50*time.Millisecond)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	body := invocation("e1")
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/provision", bytes.NewReader(body))
	if err := req.Write(c); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	r := bufio.NewReader(c)
	resp, err := http.ReadResponse(r, req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK || resp.Close {
		t.Fatalf("status %d close %v, want 200 on a kept-alive connection", resp.StatusCode, resp.Close)
	}
	if _, err := r.ReadByte(); !errors.Is(err, io.EOF) {
		t.Errorf("idle kept-alive connection: %v, want the server to close it (EOF)", err)
	}
}

// The server's timeouts are all set, and the invocation's write bound outlives host.json's
// functionTimeout (5 minutes) so the host, not the server, ends a long invocation.
func TestAzureServerTimeouts(t *testing.T) {
	srv := azureTimeouts.server(http.NotFoundHandler())
	if srv.ReadHeaderTimeout <= 0 || srv.IdleTimeout <= 0 || srv.WriteTimeout <= 5*time.Minute || srv.ReadTimeout != 0 {
		t.Errorf("timeouts %v %v %v %v: want header, idle, write > 5m, and no server ReadTimeout", srv.ReadHeaderTimeout, srv.ReadTimeout, srv.WriteTimeout, srv.IdleTimeout)
	}
}
