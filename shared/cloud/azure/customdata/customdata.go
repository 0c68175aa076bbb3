// Package customdata renders the custom data an Azure VM boots an AKS node with, and parses it
// back as the node's boot agent reads it. The shape follows AKS's "scriptless" node bootstrap
// (the Azure Karpenter provider's bootstrap.AKS): a cloud-init #cloud-config whose write_files
// put the kubelet's settings in /etc/default/kubelet (KUBELET_NODE_LABELS, the
// --register-with-taints and --max-pods flags in KUBELET_FLAGS) and its TLS-bootstrap kubeconfig
// in /var/lib/kubelet/bootstrap-kubeconfig. The fake Azure cloud parses what the provider rendered
// with Parse, so a fake node registers with exactly the labels and taints its kubelet is given.
package customdata

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/dovetail-dev/dovetail/shared/apis/validate"
)

// Paths of the files the custom data writes.
const (
	KubeletDefaultsPath     = "/etc/default/kubelet"
	BootstrapKubeconfigPath = "/var/lib/kubelet/bootstrap-kubeconfig"
)

// MaxBase64Bytes is Azure's limit on osProfile.customData: 87,380 characters of base64
// (64 KiB of data; Compute REST API, OSProfile.customData).
const MaxBase64Bytes = 87380

// Spec is what a node needs to join the cluster.
type Spec struct {
	// APIServer is the cluster's API server URL (https://…); CA its base64 PEM bundle.
	APIServer, CA string
	// BootstrapToken is the kubelet's TLS bootstrap token ("<id>.<secret>"); it is sensitive and
	// is never logged by this package.
	BootstrapToken string
	// Labels and Taints are what the kubelet registers with.
	Labels map[string]string
	Taints []corev1.Taint
	// MaxPods is the kubelet's --max-pods.
	MaxPods int64
	// ClusterDNS is the kube-dns service IP (AKS default 10.0.0.10).
	ClusterDNS string
}

// Node is what Parse reads back: the kubelet's labels, taints and max pods.
type Node struct {
	Labels  map[string]string
	Taints  []corev1.Taint
	MaxPods int64
}

type cloudConfig struct {
	WriteFiles []writeFile `json:"write_files"`
	RunCmd     []string    `json:"runcmd,omitempty"`
}

type writeFile struct {
	Path        string `json:"path"`
	Permissions string `json:"permissions"`
	Owner       string `json:"owner,omitempty"`
	Content     string `json:"content"`
}

// Render returns the base64 custom data (what osProfile.customData carries). Errors, each naming
// the field: a label or taint the API server would refuse (shared/apis/validate: whatever a
// caller skipped, none reaches the node's bootstrap), an API server that is not an https URL, a
// CA that is not base64, a cluster DNS that is not an IP, or data over Azure's limit.
func Render(s Spec) (string, error) {
	if err := s.check(); err != nil {
		return "", err
	}
	return render(s)
}

// check refuses the values the API server (labels, taints) or the kubelet (API server URL, CA,
// cluster DNS) would refuse.
func (s Spec) check() error {
	if s.APIServer == "" {
		return errors.New("custom data: the API server URL is required")
	}
	errs := validate.Labels(s.Labels, field.NewPath("labels"))
	errs = append(errs, validate.Taints(s.Taints, field.NewPath("taints"), nil)...)
	if u, err := url.Parse(s.APIServer); err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil {
		errs = append(errs, field.Invalid(field.NewPath("apiServer"), s.APIServer, "must be an https URL with a host and no credentials"))
	}
	if !isBase64(s.CA) {
		errs = append(errs, field.Invalid(field.NewPath("ca"), "(not shown)", "must be standard base64 without line breaks"))
	}
	if s.ClusterDNS != "" {
		if _, err := netip.ParseAddr(s.ClusterDNS); err != nil {
			errs = append(errs, field.Invalid(field.NewPath("clusterDNS"), s.ClusterDNS, "must be an IP address"))
		}
	}
	if s.MaxPods < 0 {
		errs = append(errs, field.Invalid(field.NewPath("maxPods"), s.MaxPods, "must not be negative"))
	}
	if len(errs) > 0 {
		return fmt.Errorf("custom data: %w", errs.ToAggregate())
	}
	return nil
}

// render writes the cloud-config by construction: the document and the bootstrap kubeconfig are
// marshalled from structs (sigs.k8s.io/yaml), so any value is one YAML string; the kubelet
// defaults file is built by envFile, which refuses a word its readers would not pass on intact.
func render(s Spec) (string, error) {
	// YAML carries only its printable characters (YAML 1.2 c-printable); anything else would
	// fail inside the marshaller without naming the field. The token is never echoed.
	for _, f := range []struct{ name, v string }{{"apiServer", s.APIServer}, {"ca", s.CA}, {"bootstrapToken", s.BootstrapToken}} {
		if i := strings.IndexFunc(f.v, func(r rune) bool { return !yamlPrintable(r) }); i >= 0 || !utf8.ValidString(f.v) {
			return "", fmt.Errorf("custom data: %s holds a character YAML cannot carry", f.name)
		}
	}
	flags := []string{"--cloud-provider=external", "--kubeconfig=/var/lib/kubelet/kubeconfig",
		"--bootstrap-kubeconfig=" + BootstrapKubeconfigPath, "--max-pods=" + strconv.FormatInt(s.MaxPods, 10)}
	if len(s.Taints) > 0 {
		parts := make([]string, 0, len(s.Taints))
		for _, t := range s.Taints {
			parts = append(parts, t.Key+"="+t.Value+":"+string(t.Effect))
		}
		flags = append(flags, "--register-with-taints="+strings.Join(parts, ","))
	}
	if s.ClusterDNS != "" {
		flags = append(flags, "--cluster-dns="+s.ClusterDNS)
	}
	var env envFile
	if err := env.checkTaints(s.Taints); err != nil {
		return "", err
	}
	if err := env.set("KUBELET_FLAGS", flags...); err != nil {
		return "", err
	}
	if err := env.setList("KUBELET_NODE_LABELS", labelPairs(s.Labels)); err != nil {
		return "", err
	}
	kubeconfig, err := yaml.Marshal(bootstrapKubeconfig(s))
	if err != nil {
		return "", fmt.Errorf("custom data: bootstrap kubeconfig: %w", err)
	}
	doc, err := yaml.Marshal(cloudConfig{
		WriteFiles: []writeFile{
			{Path: KubeletDefaultsPath, Permissions: "0644", Owner: "root", Content: env.String()},
			{Path: BootstrapKubeconfigPath, Permissions: "0600", Owner: "root", Content: string(kubeconfig)},
		},
		RunCmd: []string{"systemctl enable --now kubelet"},
	})
	if err != nil {
		return "", fmt.Errorf("custom data: %w", err)
	}
	out := base64.StdEncoding.EncodeToString(append([]byte("#cloud-config\n"), doc...))
	if len(out) > MaxBase64Bytes {
		return "", fmt.Errorf("custom data: %d base64 characters, Azure allows at most %d", len(out), MaxBase64Bytes)
	}
	return out, nil
}

// kubeconfig is the subset of a client-go kubeconfig (clientcmd/api/v1 Config) the kubelet's TLS
// bootstrap reads: one cluster, one token user, one context.
type kubeconfig struct {
	APIVersion     string         `json:"apiVersion"`
	Kind           string         `json:"kind"`
	Clusters       []namedCluster `json:"clusters"`
	Users          []namedUser    `json:"users"`
	Contexts       []namedContext `json:"contexts"`
	CurrentContext string         `json:"current-context"`
}

type namedCluster struct {
	Name    string `json:"name"`
	Cluster struct {
		Server                   string `json:"server"`
		CertificateAuthorityData string `json:"certificate-authority-data,omitempty"`
	} `json:"cluster"`
}

type namedUser struct {
	Name string `json:"name"`
	User struct {
		Token string `json:"token,omitempty"`
	} `json:"user"`
}

type namedContext struct {
	Name    string `json:"name"`
	Context struct {
		Cluster string `json:"cluster"`
		User    string `json:"user"`
	} `json:"context"`
}

func bootstrapKubeconfig(s Spec) kubeconfig {
	var c namedCluster
	c.Name, c.Cluster.Server, c.Cluster.CertificateAuthorityData = "localcluster", s.APIServer, s.CA
	var u namedUser
	u.Name, u.User.Token = "kubelet-bootstrap", s.BootstrapToken
	var x namedContext
	x.Name, x.Context.Cluster, x.Context.User = "bootstrap-context", "localcluster", "kubelet-bootstrap"
	return kubeconfig{APIVersion: "v1", Kind: "Config", Clusters: []namedCluster{c}, Users: []namedUser{u},
		Contexts: []namedContext{x}, CurrentContext: "bootstrap-context"}
}

// Parse reads base64 custom data back as the node's boot agent does. Errors name what is
// missing or malformed.
func Parse(b64 string) (*Node, error) {
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, fmt.Errorf("custom data: not base64: %w", err)
	}
	body, ok := strings.CutPrefix(string(raw), "#cloud-config\n")
	if !ok {
		return nil, errors.New("custom data: not a #cloud-config document")
	}
	var cc cloudConfig
	if err := yaml.UnmarshalStrict([]byte(body), &cc); err != nil {
		return nil, fmt.Errorf("custom data: %w", err)
	}
	for _, f := range cc.WriteFiles {
		if f.Path == KubeletDefaultsPath {
			return parseDefaults(f.Content)
		}
	}
	return nil, fmt.Errorf("custom data: no %s", KubeletDefaultsPath)
}

func parseDefaults(content string) (*Node, error) {
	n := &Node{Labels: map[string]string{}}
	for _, line := range strings.Split(content, "\n") {
		key, value, _ := strings.Cut(line, "=")
		switch key {
		case "KUBELET_NODE_LABELS":
			for _, kv := range strings.Split(value, ",") {
				if kv == "" {
					continue
				}
				k, v, ok := strings.Cut(kv, "=")
				if !ok {
					return nil, fmt.Errorf("custom data: KUBELET_NODE_LABELS entry %q is not key=value", kv)
				}
				n.Labels[k] = v
			}
		case "KUBELET_FLAGS":
			for _, f := range strings.Fields(value) {
				if t, ok := strings.CutPrefix(f, "--register-with-taints="); ok {
					taints, err := parseTaints(t)
					if err != nil {
						return nil, err
					}
					n.Taints = taints
				}
				if m, ok := strings.CutPrefix(f, "--max-pods="); ok {
					v, err := strconv.ParseInt(m, 10, 64)
					if err != nil {
						return nil, fmt.Errorf("custom data: --max-pods=%s", m)
					}
					n.MaxPods = v
				}
			}
		}
	}
	return n, nil
}

// isBase64 is standard base64 (RFC 4648 4) with no line breaks, which the decoder would skip.
func isBase64(v string) bool {
	if strings.ContainsAny(v, "\r\n") {
		return false
	}
	_, err := base64.StdEncoding.DecodeString(v)
	return err == nil
}

// yamlPrintable is YAML 1.2's c-printable production less U+0085 (NEL): YAML also counts NEL as
// a line break, and go-yaml writes it raw and reads it back folded (found by the property test).
func yamlPrintable(r rune) bool {
	switch {
	case r == '\t' || r == '\n' || r == '\r':
		return true
	case r >= 0x20 && r <= 0x7e, r >= 0xa0 && r <= 0xd7ff, r >= 0xe000 && r <= 0xfffd, r >= 0x10000 && r <= 0x10ffff:
		return true
	}
	return false
}

func labelPairs(labels map[string]string) []string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+labels[k])
	}
	return parts
}

func parseTaints(s string) ([]corev1.Taint, error) {
	var out []corev1.Taint
	for _, t := range strings.Split(s, ",") {
		kv, effect, ok := strings.Cut(t, ":")
		if !ok {
			return nil, fmt.Errorf("custom data: taint %q has no effect", t)
		}
		k, v, _ := strings.Cut(kv, "=")
		out = append(out, corev1.Taint{Key: k, Value: v, Effect: corev1.TaintEffect(effect)})
	}
	return out, nil
}
