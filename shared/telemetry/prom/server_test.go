package prom

// The metrics server closes an idle keep-alive connection and cuts off a client that stalls
// its request headers; asserted by what the connections see.

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

func start(t *testing.T, s *Server) net.Conn {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s.Addr = "127.0.0.1:0"
	addr, err := s.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second)) // the test's own bound, far above the server's
	return c
}

func TestServerClosesIdleConnections(t *testing.T) {
	c := start(t, &Server{IdleTimeout: 50 * time.Millisecond})
	if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: h\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(c)
	resp, err := http.ReadResponse(r, nil)
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

func TestServerCutsOffStalledHeaders(t *testing.T) {
	c := start(t, &Server{readHeaderTimeout: 50 * time.Millisecond})
	if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: h\r\n"); err != nil { // no blank line: headers never end
		t.Fatal(err)
	}
	if _, err := io.ReadAll(c); err != nil {
		t.Errorf("stalled headers: %v, want the server to close the connection", err)
	}
}
