// Package userdata renders the EC2 user data that makes an instance join an EKS cluster as a
// node with given labels, taints and kubelet settings, and parses it back the way the node's
// boot agent reads it (nodeadm on AL2023, the settings API on Bottlerocket). The parser exists so
// the fake EC2 endpoint can boot a node exactly from what the launch template says.
//
// Formats:
//   - AL2023: a MIME multi-part document whose application/node.eks.aws part is a nodeadm
//     NodeConfig (apiVersion node.eks.aws/v1alpha1; amazon-eks-ami nodeadm documentation). Labels
//     and taints go in spec.kubelet.flags as --node-labels and --register-with-taints (kubelet
//     command-line reference); kubelet settings in spec.kubelet.config (KubeletConfiguration field
//     names).
//   - Bottlerocket: TOML settings (Bottlerocket settings reference): settings.kubernetes
//     cluster-name, api-server, cluster-certificate, max-pods, cluster-dns-ip, node-labels
//     (key = "value"), node-taints (key = ["value:Effect", ...]), kube-reserved, system-reserved,
//     eviction-hard.
//   - AL2: a shell script calling /etc/eks/bootstrap.sh with --kubelet-extra-args.
//   - Custom: the NodeClass's spec.userData, unchanged.
package userdata

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/mail"
	"net/textproto"
	"sort"
	"strconv"
	"strings"

	toml "github.com/pelletier/go-toml/v2"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// Boundary separates the parts of the AL2023 MIME document. Fixed, so the same inputs render the
// same bytes (launch templates are named by a hash of their contents).
const Boundary = "//dovetail//"

// NodeConfigContentType is the MIME type nodeadm reads its NodeConfig from.
const NodeConfigContentType = "application/node.eks.aws"

// Spec is what a node needs to join the cluster.
type Spec struct {
	// Family is the AMI family: AL2023, Bottlerocket, AL2 or Custom (apisv1.AMIFamily*).
	Family string
	// ClusterName, APIServerEndpoint (https URL) and CertificateAuthority (base64 PEM bundle), as
	// EKS DescribeCluster reports them.
	ClusterName          string
	APIServerEndpoint    string
	CertificateAuthority string
	// ServiceCIDR is the cluster's service CIDR (nodeadm derives the cluster DNS address from it).
	ServiceCIDR string
	// Labels and Taints the kubelet registers the node with.
	Labels map[string]string
	Taints []corev1.Taint
	// Kubelet is the NodeClass kubelet block (may be nil).
	Kubelet *apisv1.KubeletConfiguration
	// Custom is the NodeClass's spec.userData: merged into AL2023 (as its own MIME parts, before
	// Dovetail's) and Bottlerocket (TOML, Dovetail's keys win) documents; the whole user data for
	// Custom.
	Custom string
}

// Render returns the user data (plain text; EC2 wants it base64-encoded). Errors: a missing
// cluster name/endpoint/CA for a family that joins by itself, Windows families (not supported),
// and a Custom part that does not parse.
func Render(s Spec) (string, error) {
	switch s.Family {
	case apisv1.AMIFamilyCustom:
		return s.Custom, nil
	case apisv1.AMIFamilyAL2023, apisv1.AMIFamilyBottlerocket, apisv1.AMIFamilyAL2:
	default:
		return "", fmt.Errorf("amiFamily %q: user data is rendered for AL2023, Bottlerocket, AL2 and Custom only", s.Family)
	}
	switch {
	case s.ClusterName == "":
		return "", errors.New("cluster name: required to join the cluster")
	case s.APIServerEndpoint == "":
		return "", errors.New("cluster endpoint: required to join the cluster")
	case s.CertificateAuthority == "":
		return "", errors.New("cluster certificate authority: required to join the cluster")
	}
	switch s.Family {
	case apisv1.AMIFamilyAL2023:
		return renderAL2023(s)
	case apisv1.AMIFamilyBottlerocket:
		return renderBottlerocket(s)
	default:
		return renderAL2(s), nil
	}
}

// LabelsFlag renders labels as kubelet's --node-labels value: k=v pairs sorted by key, comma-separated.
func LabelsFlag(labels map[string]string) string {
	keys := sortedKeys(labels)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+labels[k])
	}
	return strings.Join(parts, ",")
}

// TaintsFlag renders taints as kubelet's --register-with-taints value: key[=value]:Effect, comma-separated.
func TaintsFlag(taints []corev1.Taint) string {
	parts := make([]string, 0, len(taints))
	for _, t := range taints {
		parts = append(parts, taintString(t))
	}
	return strings.Join(parts, ",")
}

func taintString(t corev1.Taint) string {
	if t.Value == "" {
		return t.Key + ":" + string(t.Effect)
	}
	return t.Key + "=" + t.Value + ":" + string(t.Effect)
}

// nodeConfig is the nodeadm NodeConfig subset Dovetail writes.
type nodeConfig struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Spec       nodeConfigSpec `json:"spec"`
}

type nodeConfigSpec struct {
	Cluster *clusterDetails `json:"cluster,omitempty"`
	Kubelet *kubeletOptions `json:"kubelet,omitempty"`
}

type clusterDetails struct {
	Name                 string `json:"name,omitempty"`
	APIServerEndpoint    string `json:"apiServerEndpoint,omitempty"`
	CertificateAuthority string `json:"certificateAuthority,omitempty"`
	CIDR                 string `json:"cidr,omitempty"`
}

type kubeletOptions struct {
	Config *apisv1.KubeletConfiguration `json:"config,omitempty"`
	Flags  []string                     `json:"flags,omitempty"`
}

func renderAL2023(s Spec) (string, error) {
	var buf bytes.Buffer
	buf.WriteString("MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"" + Boundary + "\"\r\n\r\n")
	w := multipart.NewWriter(&buf)
	if err := w.SetBoundary(Boundary); err != nil {
		return "", err
	}
	if strings.TrimSpace(s.Custom) != "" {
		parts, err := customParts(s.Custom)
		if err != nil {
			return "", fmt.Errorf("spec.userData: %w", err)
		}
		for _, p := range parts {
			pw, err := w.CreatePart(textproto.MIMEHeader{"Content-Type": {p.contentType}})
			if err != nil {
				return "", err
			}
			_, _ = pw.Write(p.body)
		}
	}
	nc := nodeConfig{APIVersion: "node.eks.aws/v1alpha1", Kind: "NodeConfig", Spec: nodeConfigSpec{
		Cluster: &clusterDetails{Name: s.ClusterName, APIServerEndpoint: s.APIServerEndpoint,
			CertificateAuthority: s.CertificateAuthority, CIDR: s.ServiceCIDR},
	}}
	ko := &kubeletOptions{Config: s.Kubelet}
	if len(s.Labels) > 0 {
		ko.Flags = append(ko.Flags, "--node-labels="+LabelsFlag(s.Labels))
	}
	if len(s.Taints) > 0 {
		ko.Flags = append(ko.Flags, "--register-with-taints="+TaintsFlag(s.Taints))
	}
	if ko.Config != nil || len(ko.Flags) > 0 {
		nc.Spec.Kubelet = ko
	}
	y, err := yaml.Marshal(nc)
	if err != nil {
		return "", err
	}
	pw, err := w.CreatePart(textproto.MIMEHeader{"Content-Type": {NodeConfigContentType}})
	if err != nil {
		return "", err
	}
	_, _ = pw.Write(append([]byte("---\n"), y...))
	if err := w.Close(); err != nil {
		return "", err
	}
	return buf.String(), nil
}

type part struct {
	contentType string
	body        []byte
}

// customParts splits a NodeClass's AL2023 userData into MIME parts: a MIME document gives its
// parts; a shell script is text/x-shellscript; anything else is taken as a NodeConfig.
func customParts(s string) ([]part, error) {
	if isMIME(s) {
		return readParts(s)
	}
	if strings.HasPrefix(strings.TrimSpace(s), "#!") {
		return []part{{contentType: "text/x-shellscript; charset=\"us-ascii\"", body: []byte(s)}}, nil
	}
	return []part{{contentType: NodeConfigContentType, body: []byte(s)}}, nil
}

func isMIME(s string) bool {
	head := strings.ToLower(s[:min(len(s), 200)])
	return strings.HasPrefix(head, "mime-version:") || strings.HasPrefix(head, "content-type: multipart/")
}

// readParts reads the parts of a MIME multi-part document.
func readParts(s string) ([]part, error) {
	msg, err := mail.ReadMessage(strings.NewReader(s))
	if err != nil {
		return nil, fmt.Errorf("MIME document: %w", err)
	}
	mt, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil {
		return nil, fmt.Errorf("MIME Content-Type: %w", err)
	}
	if !strings.HasPrefix(mt, "multipart/") {
		return nil, fmt.Errorf("MIME Content-Type %q is not multipart", mt)
	}
	r := multipart.NewReader(msg.Body, params["boundary"])
	var out []part
	for {
		p, err := r.NextPart()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("MIME part %d: %w", len(out)+1, err)
		}
		body, err := io.ReadAll(p)
		if err != nil {
			return nil, fmt.Errorf("MIME part %d: %w", len(out)+1, err)
		}
		out = append(out, part{contentType: p.Header.Get("Content-Type"), body: body})
	}
}

func renderBottlerocket(s Spec) (string, error) {
	doc := map[string]any{}
	if strings.TrimSpace(s.Custom) != "" {
		if err := toml.Unmarshal([]byte(s.Custom), &doc); err != nil {
			return "", fmt.Errorf("spec.userData: Bottlerocket settings are TOML: %w", err)
		}
	}
	settings := table(doc, "settings")
	k8s := table(settings, "kubernetes")
	k8s["cluster-name"] = s.ClusterName
	k8s["api-server"] = s.APIServerEndpoint
	k8s["cluster-certificate"] = s.CertificateAuthority
	if len(s.Labels) > 0 {
		labels := table(k8s, "node-labels")
		for k, v := range s.Labels {
			labels[k] = v
		}
	}
	if len(s.Taints) > 0 {
		taints := table(k8s, "node-taints")
		for _, t := range s.Taints {
			v := t.Value + ":" + string(t.Effect)
			list, _ := taints[t.Key].([]any)
			taints[t.Key] = append(list, v)
		}
	}
	if k := s.Kubelet; k != nil {
		if k.MaxPods != nil {
			k8s["max-pods"] = int64(*k.MaxPods)
		}
		if len(k.ClusterDNS) > 0 {
			k8s["cluster-dns-ip"] = k.ClusterDNS[0]
		}
		for key, m := range map[string]map[string]string{"kube-reserved": k.KubeReserved, "system-reserved": k.SystemReserved, "eviction-hard": k.EvictionHard} {
			if len(m) == 0 {
				continue
			}
			t := table(k8s, key)
			for rk, rv := range m {
				t[rk] = rv
			}
		}
	}
	b, err := toml.Marshal(doc)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// table returns m[key] as a TOML table, creating it.
func table(m map[string]any, key string) map[string]any {
	if t, ok := m[key].(map[string]any); ok {
		return t
	}
	t := map[string]any{}
	m[key] = t
	return t
}

func renderAL2(s Spec) string {
	var args []string
	if len(s.Labels) > 0 {
		args = append(args, "--node-labels="+LabelsFlag(s.Labels))
	}
	if len(s.Taints) > 0 {
		args = append(args, "--register-with-taints="+TaintsFlag(s.Taints))
	}
	if s.Kubelet != nil && s.Kubelet.MaxPods != nil {
		args = append(args, "--max-pods="+strconv.Itoa(int(*s.Kubelet.MaxPods)))
	}
	var b strings.Builder
	b.WriteString("#!/bin/bash -xe\n")
	if s.Custom != "" {
		b.WriteString(s.Custom + "\n")
	}
	fmt.Fprintf(&b, "/etc/eks/bootstrap.sh '%s' --apiserver-endpoint '%s' --b64-cluster-ca '%s'", s.ClusterName, s.APIServerEndpoint, s.CertificateAuthority)
	if len(args) > 0 {
		fmt.Fprintf(&b, " \\\n  --kubelet-extra-args '%s'", strings.Join(args, " "))
	}
	b.WriteString("\n")
	return b.String()
}

// Node is what a booting node reads from its user data.
type Node struct {
	ClusterName       string
	APIServerEndpoint string
	Labels            map[string]string
	Taints            []corev1.Taint
	// Kubelet holds the settings that change allocatable (maxPods, reservations, eviction) and
	// clusterDNS; nil when the user data sets none.
	Kubelet *apisv1.KubeletConfiguration
}

// Parse reads user data of an AMI family as its boot agent would. AL2023: every
// application/node.eks.aws part (or a bare NodeConfig), later parts overriding earlier ones;
// Bottlerocket: the TOML settings; AL2: the bootstrap.sh line. Errors name what did not parse.
func Parse(family, data string) (*Node, error) {
	switch family {
	case apisv1.AMIFamilyAL2023:
		return parseAL2023(data)
	case apisv1.AMIFamilyBottlerocket:
		return parseBottlerocket(data)
	case apisv1.AMIFamilyAL2:
		return parseAL2(data)
	}
	return &Node{}, nil
}

func parseAL2023(data string) (*Node, error) {
	var docs [][]byte
	if isMIME(data) {
		parts, err := readParts(data)
		if err != nil {
			return nil, err
		}
		for _, p := range parts {
			if mt, _, _ := mime.ParseMediaType(p.contentType); mt == NodeConfigContentType {
				docs = append(docs, p.body)
			}
		}
	} else {
		docs = [][]byte{[]byte(data)}
	}
	n := &Node{}
	for i, d := range docs {
		for j, y := range splitYAML(d) {
			var nc nodeConfig
			if err := yaml.Unmarshal(y, &nc); err != nil {
				return nil, fmt.Errorf("NodeConfig %d.%d: %w", i+1, j+1, err)
			}
			if nc.Kind != "" && nc.Kind != "NodeConfig" {
				return nil, fmt.Errorf("NodeConfig %d.%d: kind %q is not NodeConfig", i+1, j+1, nc.Kind)
			}
			if c := nc.Spec.Cluster; c != nil {
				if c.Name != "" {
					n.ClusterName = c.Name
				}
				if c.APIServerEndpoint != "" {
					n.APIServerEndpoint = c.APIServerEndpoint
				}
			}
			if k := nc.Spec.Kubelet; k != nil {
				if k.Config != nil {
					n.Kubelet = k.Config
				}
				if err := n.applyFlags(k.Flags); err != nil {
					return nil, fmt.Errorf("NodeConfig %d.%d: spec.kubelet.flags: %w", i+1, j+1, err)
				}
			}
		}
	}
	if n.ClusterName == "" {
		return nil, errors.New("NodeConfig: spec.cluster.name is missing, the node cannot join")
	}
	return n, nil
}

// splitYAML splits a YAML stream on "---" document separators, dropping empty documents.
func splitYAML(b []byte) [][]byte {
	var out [][]byte
	for _, d := range bytes.Split(append([]byte("\n"), b...), []byte("\n---")) {
		if len(bytes.TrimSpace(d)) > 0 {
			out = append(out, d)
		}
	}
	return out
}

// applyFlags reads --node-labels, --register-with-taints and --max-pods.
func (n *Node) applyFlags(flags []string) error {
	for _, f := range flags {
		name, val, _ := strings.Cut(strings.TrimSpace(f), "=")
		switch name {
		case "--node-labels":
			if n.Labels == nil {
				n.Labels = map[string]string{}
			}
			for _, kv := range strings.Split(val, ",") {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || k == "" {
					return fmt.Errorf("--node-labels: %q is not key=value", kv)
				}
				n.Labels[k] = v
			}
		case "--register-with-taints":
			for _, s := range strings.Split(val, ",") {
				t, err := ParseTaint(s)
				if err != nil {
					return fmt.Errorf("--register-with-taints: %w", err)
				}
				n.Taints = append(n.Taints, t)
			}
		case "--max-pods":
			v, err := strconv.ParseInt(val, 10, 32)
			if err != nil {
				return fmt.Errorf("--max-pods: %w", err)
			}
			if n.Kubelet == nil {
				n.Kubelet = &apisv1.KubeletConfiguration{}
			}
			mp := int32(v)
			n.Kubelet.MaxPods = &mp
		}
	}
	return nil
}

// ParseTaint parses key[=value]:Effect.
func ParseTaint(s string) (corev1.Taint, error) {
	kv, effect, ok := strings.Cut(s, ":")
	if !ok || kv == "" {
		return corev1.Taint{}, fmt.Errorf("taint %q is not key[=value]:Effect", s)
	}
	switch corev1.TaintEffect(effect) {
	case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
	default:
		return corev1.Taint{}, fmt.Errorf("taint %q: effect %q is not NoSchedule, PreferNoSchedule or NoExecute", s, effect)
	}
	k, v, _ := strings.Cut(kv, "=")
	return corev1.Taint{Key: k, Value: v, Effect: corev1.TaintEffect(effect)}, nil
}

func parseBottlerocket(data string) (*Node, error) {
	var doc struct {
		Settings struct {
			Kubernetes struct {
				ClusterName    string              `toml:"cluster-name"`
				APIServer      string              `toml:"api-server"`
				NodeLabels     map[string]string   `toml:"node-labels"`
				NodeTaints     map[string][]string `toml:"node-taints"`
				MaxPods        *int32              `toml:"max-pods"`
				ClusterDNSIP   any                 `toml:"cluster-dns-ip"`
				KubeReserved   map[string]string   `toml:"kube-reserved"`
				SystemReserved map[string]string   `toml:"system-reserved"`
				EvictionHard   map[string]string   `toml:"eviction-hard"`
			} `toml:"kubernetes"`
		} `toml:"settings"`
	}
	if err := toml.Unmarshal([]byte(data), &doc); err != nil {
		return nil, fmt.Errorf("bottlerocket settings: %w", err)
	}
	k := doc.Settings.Kubernetes
	if k.ClusterName == "" {
		return nil, errors.New("bottlerocket settings: settings.kubernetes.cluster-name is missing, the node cannot join")
	}
	n := &Node{ClusterName: k.ClusterName, APIServerEndpoint: k.APIServer, Labels: k.NodeLabels}
	for _, key := range sortedKeys(k.NodeTaints) {
		for _, ve := range k.NodeTaints[key] {
			t, err := ParseTaint(key + "=" + ve)
			if err != nil {
				return nil, fmt.Errorf("settings.kubernetes.node-taints.%s: %w", key, err)
			}
			n.Taints = append(n.Taints, t)
		}
	}
	kc := &apisv1.KubeletConfiguration{MaxPods: k.MaxPods, KubeReserved: k.KubeReserved, SystemReserved: k.SystemReserved, EvictionHard: k.EvictionHard}
	switch v := k.ClusterDNSIP.(type) {
	case string:
		kc.ClusterDNS = []string{v}
	case []any:
		for _, x := range v {
			kc.ClusterDNS = append(kc.ClusterDNS, fmt.Sprint(x))
		}
	}
	if kc.MaxPods != nil || kc.KubeReserved != nil || kc.SystemReserved != nil || kc.EvictionHard != nil || kc.ClusterDNS != nil {
		n.Kubelet = kc
	}
	return n, nil
}

func parseAL2(data string) (*Node, error) {
	i := strings.Index(data, "/etc/eks/bootstrap.sh '")
	if i < 0 {
		return nil, errors.New("AL2 user data: no /etc/eks/bootstrap.sh call, the node cannot join")
	}
	rest := data[i+len("/etc/eks/bootstrap.sh '"):]
	name, _, _ := strings.Cut(rest, "'")
	n := &Node{ClusterName: name}
	if _, args, ok := strings.Cut(rest, "--kubelet-extra-args '"); ok {
		args, _, _ = strings.Cut(args, "'")
		if err := n.applyFlags(strings.Fields(args)); err != nil {
			return nil, fmt.Errorf("AL2 user data: --kubelet-extra-args: %w", err)
		}
	}
	return n, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
