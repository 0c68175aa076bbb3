package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/dovetail-dev/dovetail/e2e/realcluster"
	"github.com/dovetail-dev/dovetail/localdev"
	"github.com/dovetail-dev/dovetail/shared/queue/nats/natsauth"
	"github.com/dovetail-dev/dovetail/shared/telemetry"
)

// buildAgent builds Dovetail's agent binary (./agent/cmd/agent of the repository this harness
// runs in) into dir, for a run without -agent-bin.
func buildAgent(ctx context.Context, dir string) (string, error) {
	root, err := realcluster.RepoRoot()
	if err != nil {
		return "", err
	}
	dir, err = filepath.Abs(dir) // go build runs in root
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "dovetail-agent")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./agent/cmd/agent")
	cmd.Dir, cmd.Stdout, cmd.Stderr = root, os.Stderr, os.Stderr
	log.Printf("building the agent: go build -o %s ./agent/cmd/agent (in %s)", bin, root)
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building the agent: %w", err)
	}
	return bin, nil
}

// agentProc is Dovetail's agent binary running as its own process beside local dev, as the
// Helm chart deploys it: its own ServiceAccount token (agent/rbac.yaml's least-privilege
// roles), its own NATS identity (the agent role's nkey over TLS, verified against the embedded
// server's CA), the chart's arguments (leader election on, the stream ensured at start, the
// claim-check directory shared with the functions).
type agentProc struct {
	cmd  *exec.Cmd
	addr string // its HTTP server: /metrics, /readyz
	log  string
}

// startAgentProc starts bin against env and waits until its /readyz answers 200 (informers
// synced and the Lease held) or timeout passes. ttl bounds its ServiceAccount token.
func startAgentProc(ctx context.Context, env *localdev.Env, bin, dir string, ttl, timeout time.Duration) (*agentProc, error) {
	cp := env.ControlPlane
	token, err := cp.ServiceAccountToken(ctx, localdev.AgentNamespace, localdev.AgentServiceAccount, ttl)
	if err != nil {
		return nil, err
	}
	rc := cp.TokenConfig(token)
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["scale"] = &clientcmdapi.Cluster{Server: rc.Host, CertificateAuthorityData: rc.CAData}
	cfg.AuthInfos[localdev.AgentServiceAccount] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["agent"] = &clientcmdapi.Context{Cluster: "scale", AuthInfo: localdev.AgentServiceAccount}
	cfg.CurrentContext = "agent"
	kubeconfig := filepath.Join(dir, "agent.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, kubeconfig); err != nil {
		return nil, err
	}
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	p := &agentProc{addr: "127.0.0.1:" + strconv.Itoa(ports[0]), log: filepath.Join(dir, "agent.log")}
	logf, err := os.Create(p.log)
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the child holds its own descriptor
	p.cmd = exec.CommandContext(ctx, bin,
		"--cluster="+Cluster, "--namespace="+localdev.AgentNamespace, "--node-class-kind=EC2NodeClass", "--transport=nats",
		"--kubeconfig="+kubeconfig, "--http-addr="+p.addr,
		"--nats-url="+env.NATSURL, "--ensure-stream=true",
		"--nats-nkey-seed="+env.NATSFiles.Seeds[natsauth.RoleAgent], "--nats-tls-ca="+env.NATSFiles.CA,
		"--blob-dir="+env.BlobDir)
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the agent (%s): %w", bin, err)
	}
	log.Printf("Dovetail agent %s running as pid %d (log %s)", bin, p.cmd.Process.Pid, p.log)
	if err := waitReady(ctx, "http://"+p.addr+"/readyz", timeout); err != nil {
		p.stop()
		return nil, fmt.Errorf("agent: %w (log %s)", err, p.log)
	}
	return p, nil
}

// stop ends the agent (SIGTERM, then SIGKILL after 10 s) and reaps it.
func (p *agentProc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
}

// metrics scrapes the agent's /metrics (Prometheus text format).
func (p *agentProc) metrics(ctx context.Context) (map[string]*dto.MetricFamily, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scraping the agent's /metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("scraping the agent's /metrics: %s: %s", resp.Status, b)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("parsing the agent's /metrics: %w", err)
	}
	return fams, nil
}

// HistogramTotal is one histogram metric summed over its series: observations, their sum (the
// metric's unit), and MaxLE, the smallest bucket bound every observation is at or below (+Inf
// when some fell above the last bound; 0 when there are none) — an upper bound of the largest.
type HistogramTotal struct {
	Count uint64
	Sum   float64
	MaxLE float64
}

// histogramTotalJSON is HistogramTotal on the wire between the harness's processes, MaxLE as
// strconv's text: encoding/json refuses +Inf, a 10,000-pod run's largest snapshot encode fell
// above the last bucket, and the Dovetail side's whole result was lost.
type histogramTotalJSON struct {
	Count uint64
	Sum   float64
	MaxLE string
}

// MarshalJSON writes MaxLE as text ("+Inf" above the last bucket).
func (h HistogramTotal) MarshalJSON() ([]byte, error) {
	return json.Marshal(histogramTotalJSON{h.Count, h.Sum, strconv.FormatFloat(h.MaxLE, 'g', -1, 64)})
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (h *HistogramTotal) UnmarshalJSON(b []byte) error {
	var w histogramTotalJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	le, err := strconv.ParseFloat(w.MaxLE, 64)
	if err != nil {
		return fmt.Errorf("MaxLE: %w", err)
	}
	*h = HistogramTotal{Count: w.Count, Sum: w.Sum, MaxLE: le}
	return nil
}

// Mean is Sum / Count (0 without observations).
func (h HistogramTotal) Mean() float64 {
	if h.Count == 0 {
		return 0
	}
	return h.Sum / float64(h.Count)
}

// histogramTotal sums metric m's series in fams (a scrape or a registry's Gather, by name).
// Every series of one metric has the same buckets (m.Buckets), so their cumulative counts add.
func histogramTotal(fams map[string]*dto.MetricFamily, m *telemetry.Metric) HistogramTotal {
	var t HistogramTotal
	f := fams[m.Name]
	if f == nil {
		return t
	}
	cum := map[float64]uint64{}
	for _, s := range f.GetMetric() {
		h := s.GetHistogram()
		t.Count += h.GetSampleCount()
		t.Sum += h.GetSampleSum()
		for _, b := range h.GetBucket() {
			cum[b.GetUpperBound()] += b.GetCumulativeCount()
		}
	}
	if t.Count == 0 {
		return t
	}
	t.MaxLE = inf
	for le, n := range cum {
		if n == t.Count && le < t.MaxLE {
			t.MaxLE = le
		}
	}
	return t
}

var inf = math.Inf(1)

// byName indexes gathered families by name.
func byName(fams []*dto.MetricFamily) map[string]*dto.MetricFamily {
	out := make(map[string]*dto.MetricFamily, len(fams))
	for _, f := range fams {
		out[f.GetName()] = f
	}
	return out
}
