package main

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/dovetail-dev/dovetail/e2e/realcluster"
)

// runKarpenter measures Karpenter's own controller at n pods: a fresh real control plane (the
// same binaries and kwok as the Dovetail side), Karpenter's CRDs from the module
// (kwok/charts/crds and kwok/apis/crds of sigs.k8s.io/karpenter v1.15.0), and its kwok main
// package as a process with the instance-types file generated from Dovetail's catalog.
func runKarpenter(ctx context.Context, n int, o opts, b Bounder) (Result, error) {
	r := Result{Side: sideKarpenter, N: n}
	dir, err := os.MkdirTemp(o.workDir, fmt.Sprintf("karpenter-%d-*", n))
	if err != nil {
		return r, err
	}
	cp, err := realcluster.Start(ctx, realcluster.Options{Dir: dir, Logf: log.Printf, ClientQPS: o.clientQPS})
	if err != nil {
		return r, err
	}
	defer cp.Stop()
	if err := cp.ApplyFiles(ctx, filepath.Join(o.karpenterDir, "kwok", "charts", "crds"), filepath.Join(o.karpenterDir, "kwok", "apis", "crds")); err != nil {
		return r, fmt.Errorf("installing Karpenter's CRDs: %w", err)
	}
	manifest, err := os.ReadFile(o.karpenterManifest)
	if err != nil {
		return r, err
	}
	manifest = bytes.ReplaceAll(manifest, []byte("BOOT_DELAY"), []byte(o.bootDelay.String()))
	pool := filepath.Join(dir, "karpenter.yaml")
	if err := os.WriteFile(pool, manifest, 0o600); err != nil {
		return r, err
	}
	if err := cp.ApplyFiles(ctx, pool); err != nil {
		return r, err
	}
	types := filepath.Join(dir, "instance-types.json")
	if err := os.WriteFile(types, o.kwokTypes, 0o600); err != nil {
		return r, err
	}
	ports, err := freePorts(2)
	if err != nil {
		return r, err
	}
	logf, err := os.Create(filepath.Join(dir, "karpenter.log"))
	if err != nil {
		return r, err
	}
	defer logf.Close()
	cmd := exec.CommandContext(ctx, o.karpenterBin)
	// Karpenter's operator options (pkg/operator/options) and the kwok provider's
	// (kwok/options) from the environment, as its Helm chart sets them; everything else at its
	// defaults (batch idle 1 s, max 10 s: the same as Dovetail's agent).
	cmd.Env = append(os.Environ(),
		"KUBECONFIG="+cp.Kubeconfig,
		"INSTANCE_TYPES_FILE_PATH="+types,
		"SYSTEM_NAMESPACE=kube-system",
		"DISABLE_LEADER_ELECTION=true",
		"METRICS_PORT="+strconv.Itoa(ports[0]),
		"HEALTH_PROBE_PORT="+strconv.Itoa(ports[1]),
		"LOG_LEVEL=info",
	)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return r, fmt.Errorf("starting Karpenter (%s): %w", o.karpenterBin, err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	log.Printf("Karpenter %s running as pid %d (log %s)", o.karpenterBin, cmd.Process.Pid, logf.Name())
	cfg := *cp.Config
	cfg.QPS, cfg.Burst = 200, 400
	kc, err := kubernetes.NewForConfig(&cfg)
	if err != nil {
		return r, err
	}
	dc, err := dynamic.NewForConfig(&cfg)
	if err != nil {
		return r, err
	}
	// Wait for Karpenter's health probe: its informers are synced and the controllers started.
	if err := waitReady(ctx, fmt.Sprintf("http://127.0.0.1:%d/readyz", ports[1]), 3*time.Minute); err != nil {
		return r, fmt.Errorf("karpenter: %w (log %s)", err, logf.Name())
	}
	if err := Measure(ctx, &r, kc, dc, cp.SchedulerURL, o.phase, Pricer(b.Catalog), b); err != nil {
		return r, err
	}
	if r.PeakRSS, err = PeakRSS(cmd.Process.Pid); err != nil {
		return r, err
	}
	r.PeakRSSWhat = "Karpenter controller process"
	return r, nil
}

// freePorts asks the kernel for n free loopback ports.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var out []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}
