package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dovetail-dev/dovetail/shared/queue/nats/natsauth"
	"github.com/dovetail-dev/dovetail/shared/queue/nats/natsembed"
)

// The agent process, as deployed (flags, NATS with its role's credentials, the HTTP server), with
// an API server that accepts connections and never answers (a hung or partitioned control plane:
// the case that once passed in silence): it logs the API server as unreachable, /readyz says
// so, and on SIGTERM the process returns within 5 s (issue 29's bound).
func TestAgentProcessReportsUnreachableAPIServerAndStopsOnSIGTERM(t *testing.T) {
	srv, url, err := natsembed.Run(natsembed.Options{Cluster: "sigterm"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	dir := t.TempDir()
	files, err := srv.WriteClientFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	// Accept and hold every connection without a byte in reply: the TLS handshake never ends.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var held []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters: [{name: hung, cluster: {server: "https://%s", insecure-skip-tls-verify: true}}]
users: [{name: agent, user: {token: test}}]
contexts: [{name: hung, context: {cluster: hung, user: agent}}]
current-context: hung
`, ln.Addr()), 0o600); err != nil {
		t.Fatal(err)
	}
	httpAddr := freeAddr(t)

	logs := &syncBuffer{}
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(logs, nil)))
	t.Cleanup(func() { slog.SetDefault(prev) })

	cmd := newCommand()
	cmd.SetArgs([]string{"--cluster", "sigterm", "--namespace", "dovetail-system", "--kubeconfig", kubeconfig,
		"--nats-url", url, "--" + natsauth.FlagNkeySeed, files.Seeds[natsauth.RoleAgent], "--" + natsauth.FlagTLSCA, files.CA,
		"--http-addr", httpAddr})
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(context.Background()) }()

	// The first probe gives up after ProbeTimeout (5 s): wait for its log line, bounded.
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(logs.String(), "kubernetes API server unreachable") {
		select {
		case err := <-done:
			t.Fatalf("agent exited before SIGTERM: %v\n%s", err, logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no log of the unreachable API server within 20 s:\n%s", logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	resp, err := http.Get("http://" + httpAddr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "kubernetes API server unreachable") {
		t.Errorf("/readyz = %d %q, want 503 naming the unreachable API server", resp.StatusCode, body)
	}

	// signal.NotifyContext in the command's RunE has been registered since before the log line,
	// so SIGTERM reaches the agent rather than ending the test binary.
	sigterm := time.Now()
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("agent after SIGTERM: %v", err)
		}
		t.Logf("agent process returned %s after SIGTERM", time.Since(sigterm).Round(time.Millisecond))
	case <-time.After(5 * time.Second):
		t.Fatalf("agent still running 5 s after SIGTERM:\n%s", logs.String())
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// syncBuffer is a bytes.Buffer safe for the logger's writes and the test's reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
