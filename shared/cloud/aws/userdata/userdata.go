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
//     eviction-hard; settings.bootstrap-commands for instance-store RAID0.
//   - AL2: a bash script calling /etc/eks/bootstrap.sh with --kubelet-extra-args (and
//     --local-disks for instance-store RAID0); every argument is one single-quoted word
//     (script.command), and Parse reads it back with a bash parser.
//   - Windows2019, Windows2022, Windows2025: a <powershell> script calling the EKS bootstrap
//     script Start-EKSBootstrap.ps1 with single-quoted values (windows.go).
//   - Custom: the NodeClass's spec.userData, unchanged.
//
// Every renderer escapes by construction: YAML and TOML are marshalled from values, MIME is
// written by mime/multipart, bash words are quoted by one function. What is not escaped is the
// NodeClass's own spec.userData (its author's script or settings, merged as parts or parsed
// TOML, or the whole user data for Custom). Render also refuses, before any renderer runs, a
// label, taint or cluster value the API server or EKS would refuse (Spec.check).
package userdata

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/mail"
	"net/netip"
	"net/textproto"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	toml "github.com/pelletier/go-toml/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/apis/validate"
)

// Boundary separates the parts of the AL2023 MIME document. Fixed, so the same inputs render the
// same bytes (launch templates are named by a hash of their contents).
const Boundary = "//dovetail//"

// NodeConfigContentType is the MIME type nodeadm reads its NodeConfig from.
const NodeConfigContentType = "application/node.eks.aws"

// Spec is what a node needs to join the cluster.
type Spec struct {
	// Family is the AMI family: AL2023, Bottlerocket, AL2, Windows2019/2022/2025 or Custom
	// (apisv1.AMIFamily*).
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
	// InstanceStorePolicy is the NodeClass spec.instanceStorePolicy: "" (instance store left
	// alone) or apisv1.InstanceStorePolicyRAID0, which asks the boot agent to assemble the
	// instance-store volumes into one RAID0 array and keep ephemeral storage there, rendered as
	// Karpenter's AWS provider renders it (pkg/providers/amifamily/bootstrap, v1.14): nodeadm
	// spec.instance.localStorage.strategy RAID0 (AL2023), bootstrap.sh --local-disks raid0 (AL2),
	// the "000-mount-instance-storage" bootstrap command running apiclient ephemeral-storage init
	// and bind (Bottlerocket).
	InstanceStorePolicy string
	// Custom is the NodeClass's spec.userData: merged into AL2023 (as its own MIME parts, before
	// Dovetail's) and Bottlerocket (TOML, Dovetail's keys win) documents; the whole user data for
	// Custom.
	Custom string
}

// Render returns the user data (plain text; EC2 wants it base64-encoded). Errors: a missing
// cluster name/endpoint/CA for a family that joins by itself, an unknown family,
// a Custom part that does not parse, and any value the API server or EKS would refuse (Spec.check):
// whatever a caller skipped, an invalid label or taint never reaches a renderer.
func Render(s Spec) (string, error) {
	switch s.Family {
	case apisv1.AMIFamilyCustom:
		return s.Custom, nil
	case apisv1.AMIFamilyAL2023, apisv1.AMIFamilyBottlerocket, apisv1.AMIFamilyAL2:
	default:
		if !apisv1.IsWindowsFamily(s.Family) {
			return "", fmt.Errorf("amiFamily %q: user data is rendered for AL2023, Bottlerocket, AL2, Windows2019, Windows2022, Windows2025 and Custom only", s.Family)
		}
	}
	switch {
	case s.ClusterName == "":
		return "", errors.New("cluster name: required to join the cluster")
	case s.APIServerEndpoint == "":
		return "", errors.New("cluster endpoint: required to join the cluster")
	case s.CertificateAuthority == "":
		return "", errors.New("cluster certificate authority: required to join the cluster")
	}
	if err := s.check(); err != nil {
		return "", err
	}
	switch s.Family {
	case apisv1.AMIFamilyAL2023:
		return renderAL2023(s)
	case apisv1.AMIFamilyBottlerocket:
		return renderBottlerocket(s)
	case apisv1.AMIFamilyAL2:
		return renderAL2(s)
	default:
		return renderWindows(s)
	}
}

// eksClusterName is EKS CreateCluster's rule for a cluster name: 1-100 characters, alphanumerics,
// hyphens and underscores, starting with an alphanumeric (EKS API reference, CreateCluster name).
var eksClusterName = regexp.MustCompile(`^[0-9A-Za-z][A-Za-z0-9_-]{0,99}$`)

// check is the launch path's last defence: every value that reaches the user data is one the
// API server (labels, taints: shared/apis/validate) or EKS (cluster name, endpoint, CA, service
// CIDR, cluster DNS) would accept. The renderers escape whatever they are given; this keeps what
// a node registers with to what a cluster could hold. Errors name the field.
func (s Spec) check() error {
	errs := validate.Labels(s.Labels, field.NewPath("labels"))
	errs = append(errs, validate.Taints(s.Taints, field.NewPath("taints"), nil)...)
	if !eksClusterName.MatchString(s.ClusterName) {
		errs = append(errs, field.Invalid(field.NewPath("clusterName"), s.ClusterName, "must be 1-100 alphanumerics, '-' or '_', starting alphanumeric (EKS cluster name)"))
	}
	if u, err := url.Parse(s.APIServerEndpoint); err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		errs = append(errs, field.Invalid(field.NewPath("apiServerEndpoint"), s.APIServerEndpoint, "must be an https URL with a host and no credentials, query or fragment"))
	}
	// The decoder skips line breaks; a CA holding one is refused all the same (nodeadm and
	// bootstrap.sh take it as one value).
	if _, err := base64.StdEncoding.DecodeString(s.CertificateAuthority); err != nil || strings.ContainsAny(s.CertificateAuthority, "\r\n") {
		errs = append(errs, field.Invalid(field.NewPath("certificateAuthority"), "(not shown)", "must be standard base64 without line breaks"))
	}
	if s.ServiceCIDR != "" {
		if _, err := netip.ParsePrefix(s.ServiceCIDR); err != nil {
			errs = append(errs, field.Invalid(field.NewPath("serviceCIDR"), s.ServiceCIDR, "must be a CIDR"))
		}
	}
	if p := s.InstanceStorePolicy; p != "" && p != apisv1.InstanceStorePolicyRAID0 {
		errs = append(errs, field.NotSupported(field.NewPath("instanceStorePolicy"), p, []string{apisv1.InstanceStorePolicyRAID0}))
	}
	if s.Kubelet != nil {
		for i, ip := range s.Kubelet.ClusterDNS {
			if _, err := netip.ParseAddr(ip); err != nil {
				errs = append(errs, field.Invalid(field.NewPath("kubelet", "clusterDNS").Index(i), ip, "must be an IP address"))
			}
		}
	}
	return errs.ToAggregate()
}

// texts refuses a string no user-data format carries faithfully: invalid UTF-8 (YAML, through
// JSON, would silently replace it; TOML must be UTF-8) and any character outside YAML's
// printable set (YAML 1.2, 5.1 c-printable: tab, LF, CR, U+0020-U+007E, U+00A0-U+D7FF,
// U+E000-U+FFFD, U+10000 and above), which covers NUL (bash arguments are C strings). Every
// other character is escaped by the format's own encoder. Errors name the field.
func (s Spec) texts() error {
	check := func(field, v string) error {
		if !utf8.ValidString(v) {
			return fmt.Errorf("%s: %q is not valid UTF-8", field, v)
		}
		for _, r := range v {
			if !yamlPrintable(r) {
				return fmt.Errorf("%s: %q contains %U, which user data cannot carry", field, v, r)
			}
		}
		return nil
	}
	for _, f := range []struct{ name, v string }{{"clusterName", s.ClusterName}, {"apiServerEndpoint", s.APIServerEndpoint},
		{"certificateAuthority", s.CertificateAuthority}, {"serviceCIDR", s.ServiceCIDR}} {
		if err := check(f.name, f.v); err != nil {
			return err
		}
	}
	for _, k := range sortedKeys(s.Labels) {
		if err := check("labels", k); err != nil {
			return err
		}
		if err := check("labels["+k+"]", s.Labels[k]); err != nil {
			return err
		}
	}
	for i, t := range s.Taints {
		if err := check(fmt.Sprintf("taints[%d].key", i), t.Key); err != nil {
			return err
		}
		if err := check(fmt.Sprintf("taints[%d].value", i), t.Value); err != nil {
			return err
		}
	}
	return nil
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
	Cluster  *clusterDetails  `json:"cluster,omitempty"`
	Instance *instanceOptions `json:"instance,omitempty"`
	Kubelet  *kubeletOptions  `json:"kubelet,omitempty"`
}

// instanceOptions is nodeadm's spec.instance (amazon-eks-ami nodeadm/api/v1alpha1
// InstanceOptions): localStorage.strategy is RAID0 (one RAID0 array of the instance-store
// volumes, holding the kubelet's, containerd's and pod logs' directories), RAID10 or Mount (each
// volume mounted on its own; the kubelet stays on the root volume).
type instanceOptions struct {
	LocalStorage localStorageOptions `json:"localStorage"`
}

type localStorageOptions struct {
	Strategy string `json:"strategy,omitempty"`
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
	if err := s.texts(); err != nil {
		return "", err
	}
	var buf bytes.Buffer
	// The document's own header (RFC 2045 MIME-Version, RFC 2046 multipart Content-Type), its
	// parameter quoted by mime.FormatMediaType.
	buf.WriteString("MIME-Version: 1.0\r\nContent-Type: " + mime.FormatMediaType("multipart/mixed", map[string]string{"boundary": Boundary}) + "\r\n\r\n")
	w := multipart.NewWriter(&buf)
	if err := w.SetBoundary(Boundary); err != nil {
		return "", err
	}
	if strings.TrimSpace(s.Custom) != "" {
		parts, err := customParts(s.Custom)
		if err != nil {
			return "", fmt.Errorf("spec.userData: %w", err)
		}
		for i, p := range parts {
			// A body holding the delimiter would end its part early and start one of its own
			// (RFC 2046 5.1.1: the delimiter must not appear inside an encapsulated part).
			if bytes.Contains(p.body, []byte("--"+Boundary)) {
				return "", fmt.Errorf("spec.userData: MIME part %d contains the boundary %q Dovetail separates parts with", i+1, Boundary)
			}
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
	if s.InstanceStorePolicy == apisv1.InstanceStorePolicyRAID0 {
		nc.Spec.Instance = &instanceOptions{LocalStorage: localStorageOptions{Strategy: LocalStorageRAID0}}
	}
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
	if err := s.texts(); err != nil {
		return "", err
	}
	doc := map[string]any{}
	if strings.TrimSpace(s.Custom) != "" {
		if err := toml.Unmarshal([]byte(s.Custom), &doc); err != nil {
			return "", fmt.Errorf("spec.userData: Bottlerocket settings are TOML: %w", err)
		}
	}
	m := merger{}
	settings := m.table(doc, "settings")
	k8s := m.table(settings, "settings", "kubernetes")
	k8s["cluster-name"] = s.ClusterName
	k8s["api-server"] = s.APIServerEndpoint
	k8s["cluster-certificate"] = s.CertificateAuthority
	if len(s.Labels) > 0 {
		labels := m.table(k8s, "settings.kubernetes", "node-labels")
		for k, v := range s.Labels {
			labels[k] = v
		}
	}
	if len(s.Taints) > 0 {
		taints := m.table(k8s, "settings.kubernetes", "node-taints")
		for _, t := range s.Taints {
			taints[t.Key] = append(m.list(taints, "settings.kubernetes.node-taints", t.Key), t.Value+":"+string(t.Effect))
		}
	}
	if k := s.Kubelet; k != nil {
		if k.MaxPods != nil {
			k8s["max-pods"] = int64(*k.MaxPods)
		}
		if len(k.ClusterDNS) > 0 {
			k8s["cluster-dns-ip"] = k.ClusterDNS[0]
		}
		for key, rm := range map[string]map[string]string{"kube-reserved": k.KubeReserved, "system-reserved": k.SystemReserved, "eviction-hard": k.EvictionHard} {
			if len(rm) == 0 {
				continue
			}
			t := m.table(k8s, "settings.kubernetes", key)
			for rk, rv := range rm {
				t[rk] = rv
			}
		}
	}
	if s.InstanceStorePolicy == apisv1.InstanceStorePolicyRAID0 {
		cmds := m.table(settings, "settings", "bootstrap-commands")
		cmds[bottlerocketMountInstanceStorage] = map[string]any{
			"commands":  []any{bottlerocketEphemeralInit, bottlerocketEphemeralBind},
			"essential": true,
			"mode":      "always",
		}
	}
	if m.err != nil {
		return "", m.err
	}
	b, err := toml.Marshal(doc)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// The Bottlerocket bootstrap command that puts ephemeral storage on the instance store, as
// Karpenter's provider writes it (pkg/providers/amifamily/bootstrap/bottlerocket.go, v1.14):
// apiclient ephemeral-storage init assembles the instance-store volumes into one RAID0 array and
// formats it; bind mounts the kubelet's, containerd's and pod logs' directories on it
// (Bottlerocket apiclient README, "ephemeral-storage"). The explicit --dirs form is the one
// Karpenter writes for an AMI whose version it cannot tell to be 1.46.0 or newer (version
// SupportsDefaultBind); it binds the same directories on every version. "essential" fails the
// boot if the command fails; "always" runs it on every boot (instance store is wiped on stop).
const bottlerocketMountInstanceStorage = "000-mount-instance-storage"

var (
	bottlerocketEphemeralInit = []any{"apiclient", "ephemeral-storage", "init"}
	bottlerocketEphemeralBind = []any{"apiclient", "ephemeral-storage", "bind", "--dirs", "/var/lib/containerd", "/var/lib/kubelet", "/var/log/pods"}
)

// LocalStorageRAID0 is what Node.LocalStorage holds when the user data asks for one RAID0 array
// of the instance-store volumes (nodeadm's LocalStorageRAID0 spelling).
const LocalStorageRAID0 = "RAID0"

// merger merges Dovetail's settings into the user's parsed TOML. Where the user's document holds
// a value of another type at a table Dovetail writes into (settings = "x", or a node-taints entry
// that is not an array), the first such conflict is kept as err, naming its dotted path: the
// user's value is never replaced silently.
type merger struct{ err error }

// table returns parent[key] as a TOML table, creating it when absent. pathAndKey is the key, or
// the dotted path of parent then the key.
func (m *merger) table(parent map[string]any, pathAndKey ...string) map[string]any {
	key := pathAndKey[len(pathAndKey)-1]
	path := key
	if len(pathAndKey) > 1 {
		path = pathAndKey[0] + "." + key
	}
	switch v := parent[key].(type) {
	case map[string]any:
		return v
	case nil:
		t := map[string]any{}
		parent[key] = t
		return t
	default:
		if m.err == nil {
			m.err = fmt.Errorf("spec.userData: %s is a %T, Dovetail writes a table there", path, v)
		}
		return map[string]any{}
	}
}

// list returns parent[key] as a TOML array (nil when absent).
func (m *merger) list(parent map[string]any, path, key string) []any {
	switch v := parent[key].(type) {
	case []any:
		return v
	case nil:
		return nil
	default:
		if m.err == nil {
			m.err = fmt.Errorf("spec.userData: %s.%q is a %T, Bottlerocket's node-taints entries are arrays", path, key, v)
		}
		return nil
	}
}

// renderAL2 writes the AL2 bootstrap: the NodeClass's userData (a script, run as written),
// then one /etc/eks/bootstrap.sh command whose every argument is a quoted word (script.command).
// The kubelet flags travel as bootstrap.sh's one --kubelet-extra-args value, which bootstrap.sh
// hands to the kubelet through systemd's KUBELET_EXTRA_ARGS, split on whitespace
// (amazon-eks-ami files/bootstrap.sh and kubelet.service).
func renderAL2(s Spec) (string, error) {
	if err := s.texts(); err != nil {
		return "", err
	}
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
	var b script
	b.raw("#!/bin/bash -xe")
	if s.Custom != "" {
		b.raw(s.Custom)
	}
	argv := []string{al2Bootstrap, s.ClusterName, "--apiserver-endpoint", s.APIServerEndpoint, "--b64-cluster-ca", s.CertificateAuthority}
	if s.Kubelet != nil && len(s.Kubelet.ClusterDNS) > 0 {
		// bootstrap.sh writes it as the kubelet's clusterDNS, and an IPv6 one needs the IPv6
		// family (Karpenter's eksbootstrap.go: --ip-family ipv6 when the first clusterDNS is
		// IPv6, then --dns-cluster-ip).
		if a, err := netip.ParseAddr(s.Kubelet.ClusterDNS[0]); err == nil && a.Is6() && !a.Is4In6() {
			argv = append(argv, "--ip-family", "ipv6")
		}
		argv = append(argv, "--dns-cluster-ip", s.Kubelet.ClusterDNS[0])
	}
	if len(args) > 0 {
		argv = append(argv, "--kubelet-extra-args", strings.Join(args, " "))
	}
	if s.InstanceStorePolicy == apisv1.InstanceStorePolicyRAID0 {
		// bootstrap.sh hands it to setup-local-disks, which builds the RAID0 array and binds the
		// kubelet's and containerd's directories onto it (amazon-eks-ami files/bootstrap.sh).
		argv = append(argv, "--local-disks", "raid0")
	}
	if err := b.command(argv...); err != nil {
		return "", err
	}
	return b.String(), nil
}

// al2Bootstrap is the EKS AL2 AMI's bootstrap script (amazon-eks-ami files/bootstrap.sh).
const al2Bootstrap = "/etc/eks/bootstrap.sh"

// Node is what a booting node reads from its user data.
type Node struct {
	ClusterName       string
	APIServerEndpoint string
	Labels            map[string]string
	Taints            []corev1.Taint
	// Kubelet holds the settings that change allocatable (maxPods, reservations, eviction) and
	// clusterDNS; nil when the user data sets none.
	Kubelet *apisv1.KubeletConfiguration
	// LocalStorage is what the boot agent does with the instance-store volumes, in nodeadm's
	// spelling: LocalStorageRAID0 (one RAID0 array holding ephemeral storage), "RAID10",
	// "Mount" (each volume on its own, ephemeral storage stays on the root volume), or "" (left
	// alone).
	LocalStorage string
}

// Parse reads user data of an AMI family as its boot agent would. AL2023: every
// application/node.eks.aws part (or a bare NodeConfig), later parts overriding earlier ones;
// Bottlerocket: the TOML settings; AL2: the bootstrap.sh line; Windows: the
// Start-EKSBootstrap.ps1 call of the <powershell> script (parseWindows). Errors name what did not parse.
func Parse(family, data string) (*Node, error) {
	switch family {
	case apisv1.AMIFamilyAL2023:
		return parseAL2023(data)
	case apisv1.AMIFamilyBottlerocket:
		return parseBottlerocket(data)
	case apisv1.AMIFamilyAL2:
		return parseAL2(data)
	}
	if apisv1.IsWindowsFamily(family) {
		return parseWindows(data)
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
			if in := nc.Spec.Instance; in != nil && in.LocalStorage.Strategy != "" {
				switch st := in.LocalStorage.Strategy; st {
				case LocalStorageRAID0, "RAID10", "Mount":
					n.LocalStorage = st
				default:
					// nodeadm's validation enum (LocalStorageStrategy: RAID0, RAID10, Mount).
					return nil, fmt.Errorf("NodeConfig %d.%d: spec.instance.localStorage.strategy %q is not RAID0, RAID10 or Mount", i+1, j+1, st)
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
			BootstrapCommands map[string]struct {
				Commands [][]string `toml:"commands"`
				Mode     string     `toml:"mode"`
			} `toml:"bootstrap-commands"`
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
	// A bootstrap command that runs apiclient ephemeral-storage init makes the instance-store
	// RAID0 array; mode "off" (or anything but "always" / "once") does not run it (Bottlerocket
	// settings reference, settings.bootstrap-commands).
	for _, name := range sortedKeys(doc.Settings.BootstrapCommands) {
		bc := doc.Settings.BootstrapCommands[name]
		if bc.Mode != "always" && bc.Mode != "once" {
			continue
		}
		for _, c := range bc.Commands {
			if len(c) >= 3 && c[0] == "apiclient" && c[1] == "ephemeral-storage" && c[2] == "init" {
				n.LocalStorage = LocalStorageRAID0
			}
		}
	}
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

// parseAL2 reads the bootstrap.sh call as the node runs it: bash parses the script
// (mvdan.cc/sh's bash parser here) and passes bootstrap.sh its words; bootstrap.sh takes the
// cluster name as its first positional argument and --kubelet-extra-args' value as the
// kubelet's extra flags, which systemd splits on whitespace (amazon-eks-ami files/bootstrap.sh:
// KUBELET_EXTRA_ARGS in /etc/systemd/system/kubelet.service.d/30-kubelet-extra-args.conf).
func parseAL2(data string) (*Node, error) {
	args, err := commandArgs(data, al2Bootstrap)
	if err != nil {
		return nil, fmt.Errorf("AL2 user data: %w, the node cannot join", err)
	}
	n := &Node{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "--") {
			if n.ClusterName == "" {
				n.ClusterName = a
			}
			continue
		}
		if i+1 >= len(args) {
			return nil, fmt.Errorf("AL2 user data: bootstrap.sh %s has no value", a)
		}
		v := args[i+1]
		i++
		switch a {
		case "--apiserver-endpoint":
			n.APIServerEndpoint = v
		case "--kubelet-extra-args":
			if err := n.applyFlags(strings.Fields(v)); err != nil {
				return nil, fmt.Errorf("AL2 user data: --kubelet-extra-args: %w", err)
			}
		case "--dns-cluster-ip":
			if n.Kubelet == nil {
				n.Kubelet = &apisv1.KubeletConfiguration{}
			}
			n.Kubelet.ClusterDNS = []string{v}
		case "--local-disks":
			// bootstrap.sh passes it to setup-local-disks, whose usage is
			// <raid0 | raid10 | mount | none> (amazon-eks-ami templates/shared/runtime/bin/
			// setup-local-disks); anything else fails the boot.
			st, ok := map[string]string{"raid0": LocalStorageRAID0, "raid10": "RAID10", "mount": "Mount", "none": ""}[v]
			if !ok {
				return nil, fmt.Errorf("AL2 user data: bootstrap.sh --local-disks %q is not raid0, raid10, mount or none", v)
			}
			n.LocalStorage = st
		}
	}
	if n.ClusterName == "" {
		return nil, errors.New("AL2 user data: bootstrap.sh has no cluster name, the node cannot join")
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
