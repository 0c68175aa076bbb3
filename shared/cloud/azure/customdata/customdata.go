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
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
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

// Render returns the base64 custom data (what osProfile.customData carries). Errors: a label or
// taint that cannot be written on a kubelet command line, no API server, or data over Azure's limit.
func Render(s Spec) (string, error) {
	if s.APIServer == "" {
		return "", errors.New("custom data: the API server URL is required")
	}
	labels, err := joinLabels(s.Labels)
	if err != nil {
		return "", err
	}
	taints, err := joinTaints(s.Taints)
	if err != nil {
		return "", err
	}
	flags := []string{"--cloud-provider=external", "--kubeconfig=/var/lib/kubelet/kubeconfig",
		"--bootstrap-kubeconfig=" + BootstrapKubeconfigPath, "--max-pods=" + strconv.FormatInt(s.MaxPods, 10)}
	if taints != "" {
		flags = append(flags, "--register-with-taints="+taints)
	}
	if s.ClusterDNS != "" {
		flags = append(flags, "--cluster-dns="+s.ClusterDNS)
	}
	defaults := "KUBELET_FLAGS=" + strings.Join(flags, " ") + "\nKUBELET_NODE_LABELS=" + labels + "\n"
	kubeconfig := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters:\n- name: localcluster\n  cluster:\n    server: %s\n    certificate-authority-data: %s\nusers:\n- name: kubelet-bootstrap\n  user:\n    token: %s\ncontexts:\n- name: bootstrap-context\n  context:\n    cluster: localcluster\n    user: kubelet-bootstrap\ncurrent-context: bootstrap-context\n",
		s.APIServer, s.CA, s.BootstrapToken)
	doc, err := yaml.Marshal(cloudConfig{
		WriteFiles: []writeFile{
			{Path: KubeletDefaultsPath, Permissions: "0644", Owner: "root", Content: defaults},
			{Path: BootstrapKubeconfigPath, Permissions: "0600", Owner: "root", Content: kubeconfig},
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

func joinLabels(labels map[string]string) (string, error) {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		v := labels[k]
		if strings.ContainsAny(k+v, ",= \n") {
			return "", fmt.Errorf("custom data: label %q=%q cannot be passed to the kubelet", k, v)
		}
		parts = append(parts, k+"="+v)
	}
	return strings.Join(parts, ","), nil
}

func joinTaints(taints []corev1.Taint) (string, error) {
	parts := make([]string, 0, len(taints))
	for _, t := range taints {
		if strings.ContainsAny(t.Key+t.Value, ",=: \n") {
			return "", fmt.Errorf("custom data: taint %q cannot be passed to the kubelet", t.ToString())
		}
		parts = append(parts, t.Key+"="+t.Value+":"+string(t.Effect))
	}
	return strings.Join(parts, ","), nil
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
