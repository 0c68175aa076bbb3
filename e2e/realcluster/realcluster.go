// Package realcluster starts and stops a real Kubernetes control plane on loopback for the e2e
// suite and `dovetail dev --control-plane real`: etcd v3.6.4, kube-apiserver, kube-controller-manager
// and kube-scheduler v1.34.2 (one binary built by `make controlplane` from e2e/controlplane), and a kwok
// controller that plays the kubelet of every Node (keeps it Ready, runs the pods bound to it).
// No container runtime, no network beyond 127.0.0.1.
//
// Security is on as in a real cluster: the API server serves TLS with a certificate from a CA
// generated at start, authenticates client certificates from that CA, authorizes with
// Node,RBAC, and signs service-account tokens with a key generated at start. The controller
// manager and the scheduler use their built-in identities (system:kube-controller-manager with
// per-controller service-account credentials, system:kube-scheduler), bound by the API server's
// bootstrap RBAC policy. The admin kubeconfig is in group system:masters; kwok, which stands in
// for every kubelet at once, is too (no kubelet identity could cover every node).
package realcluster

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// EnvBinDir names the environment variable that overrides where the control-plane binaries are.
const EnvBinDir = "DOVETAIL_CONTROLPLANE_BIN"

// DefaultBinDir is where `make controlplane` puts the binaries, relative to the repository root.
const DefaultBinDir = "build/controlplane/bin"

// ServiceCIDR is the service cluster IP range given to the API server. Nothing routes to it here:
// the API server only allocates ClusterIPs (and the kubernetes Service) from it.
const ServiceCIDR = "10.96.0.0/24"

//go:embed stages.yaml
var kwokStages []byte

// Options configures Start. The zero value finds everything in its default place.
type Options struct {
	// BinDir holds `controlplane` and `kwok` (default: $DOVETAIL_CONTROLPLANE_BIN, else
	// build/controlplane/bin under the repository root found from the working directory).
	BinDir string
	// Etcd is an external etcd binary to use instead of `controlplane etcd` (v3.6.4). It must answer
	// watch progress requests (etcd >= 3.4.31 or >= 3.5.13): without them kube-apiserver refuses
	// the streaming lists client-go >= v0.35 opens by default ("RequestWatchProgress feature is not
	// supported" in its log), and informers (kwok's, the agent's) fall behind. Debian 12's
	// etcd-server 3.4.23 is too old.
	Etcd string
	// Dir is the working directory for data, certificates, kubeconfigs and logs (default: a new
	// temporary directory, removed by Stop).
	Dir string
	// StartTimeout bounds the whole start, all components healthy (default 3 minutes: a busy
	// 2-core machine starts kube-apiserver in 10–40 s).
	StartTimeout time.Duration
	// Logf, if set, receives one line per start step.
	Logf func(format string, args ...any)
	// ClientQPS, when above 0, sets kube-controller-manager's and kube-scheduler's client rate
	// limit (--kube-api-qps and --kube-api-burst, both to this value) in place of their defaults
	// (20 QPS, burst 30 for the controller manager; 50, burst 100 for the scheduler). At 0 the
	// defaults stand, as e2e wants. A benchmark that creates thousands of pods raises it, as
	// Kubernetes' own 5,000-node scalability jobs do (kubernetes/test-infra, the
	// gce-scale-performance environment: SCHEDULER_TEST_ARGS=--kube-api-qps=100,
	// CONTROLLER_MANAGER_TEST_ARGS=--kube-api-qps=100 --kube-api-burst=100): at the defaults the
	// ReplicaSet controller creating 10,000 pods is throttled for eight minutes.
	ClientQPS int
}

// ControlPlane is a running control plane.
type ControlPlane struct {
	// Dir holds etcd's data, the certificates, kubeconfigs and one <component>.log per process.
	Dir string
	// Server is the API server's URL (https://127.0.0.1:PORT).
	Server string
	// Kubeconfig is the path of the admin kubeconfig (client certificate, group system:masters).
	Kubeconfig string
	// Config is the admin client configuration.
	Config *rest.Config
	// CAPEM is the cluster CA certificate (PEM), for building other clients' configurations.
	CAPEM []byte
	// SchedulerURL is kube-scheduler's secure endpoint (https://127.0.0.1:PORT, a self-signed
	// serving certificate); its /metrics, like /healthz, needs no credentials
	// (--authorization-always-allow-paths), so a benchmark can read the scheduler's own counts.
	SchedulerURL string

	removeDir bool
	mu        sync.Mutex
	procs     []*process
	stopped   bool
}

// process is one child process and its exit.
type process struct {
	name string
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{}
	err  error
}

// Binaries resolves where the binaries are and checks they exist; the error says how to build
// them. etcd is the command line that starts etcd (the controlplane binary's etcd subcommand
// unless Options.Etcd is set).
func (o *Options) Binaries() (controlplane, kwok string, etcd []string, err error) {
	dir := o.BinDir
	if dir == "" {
		dir = os.Getenv(EnvBinDir)
	}
	if dir == "" {
		root, rerr := RepoRoot()
		if rerr != nil {
			return "", "", nil, fmt.Errorf("finding %s: %w (set %s)", DefaultBinDir, rerr, EnvBinDir)
		}
		dir = filepath.Join(root, DefaultBinDir)
	}
	controlplane, kwok = filepath.Join(dir, "controlplane"), filepath.Join(dir, "kwok")
	for _, p := range []string{controlplane, kwok} {
		if _, serr := os.Stat(p); serr != nil {
			return "", "", nil, fmt.Errorf("control-plane binary %s is missing: run `make controlplane` (or set %s): %w", p, EnvBinDir, serr)
		}
	}
	if o.Etcd == "" {
		return controlplane, kwok, []string{controlplane, "etcd"}, nil
	}
	bin, err := exec.LookPath(o.Etcd)
	if err != nil {
		return "", "", nil, fmt.Errorf("etcd %s: %w", o.Etcd, err)
	}
	return controlplane, kwok, []string{bin}, nil
}

// RepoRoot returns the root of the dovetail checkout containing the working directory (the first
// parent with a go.mod declaring module github.com/dovetail-dev/dovetail).
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(data, []byte("module github.com/dovetail-dev/dovetail\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the dovetail repository (no go.mod of module github.com/dovetail-dev/dovetail above the working directory)")
		}
		dir = parent
	}
}

// Start starts etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok on free
// loopback ports and returns once each is healthy and the controller manager has created the
// default ServiceAccount (so pods can be admitted). On error everything started is stopped.
// The caller must call Stop.
func Start(ctx context.Context, o Options) (_ *ControlPlane, err error) {
	cpBin, kwokBin, etcdBin, err := o.Binaries()
	if err != nil {
		return nil, err
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = 3 * time.Minute
	}
	logf := o.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	ctx, cancel := context.WithTimeout(ctx, o.StartTimeout)
	defer cancel()

	cp := &ControlPlane{Dir: o.Dir}
	if cp.Dir == "" {
		if cp.Dir, err = os.MkdirTemp("", "dovetail-controlplane-*"); err != nil {
			return nil, err
		}
		cp.removeDir = true
	}
	defer func() {
		if err != nil {
			cp.Stop()
		}
	}()

	ports, err := freePorts(5)
	if err != nil {
		return nil, err
	}
	etcdPort, etcdPeer, apiPort, cmPort, schedPort := ports[0], ports[1], ports[2], ports[3], ports[4]
	cp.Server = "https://127.0.0.1:" + strconv.Itoa(apiPort)
	cp.SchedulerURL = "https://127.0.0.1:" + strconv.Itoa(schedPort)

	// Credentials, all generated now and written owner-only.
	now := time.Now()
	ca, err := newAuthority(now)
	if err != nil {
		return nil, err
	}
	cp.CAPEM = ca.pem
	serving, err := ca.serving(now, "kube-apiserver", []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.96.0.1")},
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"})
	if err != nil {
		return nil, err
	}
	saKey, saPub, err := newServiceAccountKey()
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{"ca.crt": ca.pem, "apiserver.crt": serving.CertPEM, "apiserver.key": serving.KeyPEM,
		"sa.key": saKey, "sa.pub": saPub, "kwok-stages.yaml": kwokStages}
	// Users: CN is the user, O the groups (system:kube-controller-manager and system:kube-scheduler
	// are bound by the bootstrap RBAC policy to their ClusterRoles).
	for _, u := range []struct{ file, user, group string }{
		{"admin.kubeconfig", "dovetail-admin", "system:masters"},
		{"controller-manager.kubeconfig", "system:kube-controller-manager", ""},
		{"scheduler.kubeconfig", "system:kube-scheduler", ""},
		{"kwok.kubeconfig", "kwok", "system:masters"},
	} {
		var groups []string
		if u.group != "" {
			groups = []string{u.group}
		}
		kp, err := ca.client(now, u.user, groups...)
		if err != nil {
			return nil, err
		}
		if files[u.file], err = kubeconfig(cp.Server, ca.pem, u.user, &kp, ""); err != nil {
			return nil, err
		}
	}
	if err := writeFiles(cp.Dir, files); err != nil {
		return nil, err
	}
	cp.Kubeconfig = filepath.Join(cp.Dir, "admin.kubeconfig")
	if cp.Config, err = restConfig(files["admin.kubeconfig"]); err != nil {
		return nil, err
	}
	path := func(name string) string { return filepath.Join(cp.Dir, name) }

	// etcd: data in Dir, client and peer URLs on loopback only.
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(etcdPort)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(etcdPeer)
	logf("starting etcd on %s", etcdURL)
	if err := cp.start("etcd", etcdBin[0], append(etcdBin[1:], "--name=default", "--data-dir="+path("etcd"),
		"--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=default="+peerURL, "--log-level=warn")...); err != nil {
		return nil, err
	}
	if err := cp.waitHTTP(ctx, "etcd", etcdURL+"/health", nil); err != nil {
		return nil, err
	}

	logf("starting kube-apiserver on %s", cp.Server)
	if err := cp.start("kube-apiserver", cpBin, "kube-apiserver",
		"--etcd-servers="+etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port="+strconv.Itoa(apiPort),
		"--tls-cert-file="+path("apiserver.crt"), "--tls-private-key-file="+path("apiserver.key"),
		"--client-ca-file="+path("ca.crt"),
		"--authorization-mode=Node,RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+path("sa.pub"), "--service-account-signing-key-file="+path("sa.key"),
		"--service-cluster-ip-range="+ServiceCIDR,
		"--cert-dir="+path("apiserver-certs"),
		"--profiling=false", "--v=1"); err != nil {
		return nil, err
	}
	if err := cp.waitAPIServer(ctx); err != nil {
		return nil, err
	}

	logf("starting kube-controller-manager and kube-scheduler")
	var clientQPS []string
	if o.ClientQPS > 0 {
		q := strconv.Itoa(o.ClientQPS)
		clientQPS = []string{"--kube-api-qps=" + q, "--kube-api-burst=" + q}
	}
	if err := cp.start("kube-controller-manager", cpBin, append([]string{"kube-controller-manager",
		"--kubeconfig=" + path("controller-manager.kubeconfig"),
		"--authentication-kubeconfig=" + path("controller-manager.kubeconfig"),
		"--authorization-kubeconfig=" + path("controller-manager.kubeconfig"),
		"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(cmPort),
		"--cert-dir=" + path("controller-manager-certs"),
		"--use-service-account-credentials=true",
		"--service-account-private-key-file=" + path("sa.key"), "--root-ca-file=" + path("ca.crt"),
		"--leader-elect=false", "--profiling=false", "--v=1"}, clientQPS...)...); err != nil {
		return nil, err
	}
	if err := cp.start("kube-scheduler", cpBin, append([]string{"kube-scheduler",
		"--kubeconfig=" + path("scheduler.kubeconfig"),
		"--authentication-kubeconfig=" + path("scheduler.kubeconfig"),
		"--authorization-kubeconfig=" + path("scheduler.kubeconfig"),
		"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(schedPort),
		"--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
		"--leader-elect=false", "--profiling=false", "--v=1"}, clientQPS...)...); err != nil {
		return nil, err
	}
	logf("starting kwok (plays the kubelet of every node)")
	if err := cp.start("kwok", kwokBin,
		"--kubeconfig="+path("kwok.kubeconfig"), "--config="+path("kwok-stages.yaml"),
		"--manage-all-nodes=true",
		// kwok renews each node's Lease in kube-node-lease: the heartbeat kube-controller-manager's
		// node lifecycle controller watches (kubelet default: 40 s duration, renewed every 10 s).
		"--node-lease-duration-seconds=40"); err != nil {
		return nil, err
	}
	insecure := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: insecureTLS()}}
	if err := cp.waitHTTP(ctx, "kube-controller-manager", "https://127.0.0.1:"+strconv.Itoa(cmPort)+"/healthz", insecure); err != nil {
		return nil, err
	}
	if err := cp.waitHTTP(ctx, "kube-scheduler", "https://127.0.0.1:"+strconv.Itoa(schedPort)+"/healthz", insecure); err != nil {
		return nil, err
	}
	if err := cp.waitDefaultServiceAccount(ctx); err != nil {
		return nil, err
	}
	logf("control plane ready (logs in %s)", cp.Dir)
	return cp, nil
}

// start launches a component, its output going to Dir/<name>.log. The process is put in its own
// process group and gets SIGKILL if this process dies (Linux parent-death signal), so a killed
// test leaves no control plane behind.
func (cp *ControlPlane) start(name, bin string, args ...string) error {
	log, err := os.OpenFile(filepath.Join(cp.Dir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Dir = cp.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, log: log, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	cp.mu.Lock()
	cp.procs = append(cp.procs, p)
	cp.mu.Unlock()
	return nil
}

// Exited reports the first component that has exited, with the tail of its log ("" if all run).
func (cp *ControlPlane) Exited() string {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	for _, p := range cp.procs {
		select {
		case <-p.done:
			return fmt.Sprintf("%s exited (%v); last lines of %s:\n%s", p.name, p.err, p.log.Name(), tail(p.log.Name(), 15))
		default:
		}
	}
	return ""
}

// Stop stops every component, newest first (SIGTERM, then SIGKILL after 10 s), and removes Dir
// if Start created it. It is safe to call more than once.
func (cp *ControlPlane) Stop() {
	cp.mu.Lock()
	if cp.stopped {
		cp.mu.Unlock()
		return
	}
	cp.stopped = true
	procs := cp.procs
	cp.mu.Unlock()
	for i := len(procs) - 1; i >= 0; i-- {
		p := procs[i]
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		p.log.Close()
	}
	if cp.removeDir {
		os.RemoveAll(cp.Dir)
	}
}

// Clientset returns a typed client with the admin credentials.
func (cp *ControlPlane) Clientset() (kubernetes.Interface, error) {
	return kubernetes.NewForConfig(cp.Config)
}

// TokenConfig returns a client configuration that authenticates with a bearer token (a service
// account's, from the TokenRequest API) instead of the admin certificate.
func (cp *ControlPlane) TokenConfig(token string) *rest.Config {
	return &rest.Config{Host: cp.Server, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: cp.CAPEM}}
}

// poll runs check every 250 ms until it reports done, the context ends or a component exits.
func (cp *ControlPlane) poll(ctx context.Context, what string, check func(context.Context) (bool, error)) error {
	var last error
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if msg := cp.Exited(); msg != "" {
			return false, errors.New(msg)
		}
		ok, err := check(ctx)
		if err != nil {
			last = err
		}
		return ok, nil
	})
	if err != nil {
		if msg := cp.Exited(); msg != "" {
			return fmt.Errorf("waiting for %s: %s", what, msg)
		}
		return fmt.Errorf("waiting for %s: %w (last error: %v; logs in %s)", what, err, last, cp.Dir)
	}
	return nil
}

func (cp *ControlPlane) waitHTTP(ctx context.Context, what, url string, client *http.Client) error {
	if client == nil {
		client = &http.Client{Timeout: 2 * time.Second}
	}
	return cp.poll(ctx, what, func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return false, err
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return false, fmt.Errorf("%s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
		}
		return true, nil
	})
}

// waitAPIServer waits for /readyz (every post-start hook done, including the bootstrap RBAC
// policy the other components rely on).
func (cp *ControlPlane) waitAPIServer(ctx context.Context) error {
	kc, err := cp.Clientset()
	if err != nil {
		return err
	}
	return cp.poll(ctx, "kube-apiserver /readyz", func(ctx context.Context) (bool, error) {
		_, err := kc.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil, err
	})
}

// waitDefaultServiceAccount waits for the controller manager's service-account controller to
// create default/default: until then the ServiceAccount admission plugin refuses pods.
func (cp *ControlPlane) waitDefaultServiceAccount(ctx context.Context) error {
	kc, err := cp.Clientset()
	if err != nil {
		return err
	}
	return cp.poll(ctx, "the default ServiceAccount (kube-controller-manager)", func(ctx context.Context) (bool, error) {
		_, err := kc.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
}

// freePorts asks the kernel for n distinct free loopback ports. Another process may take one
// before the component binds it; the component then exits and Start reports it.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
