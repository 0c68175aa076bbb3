// Package customdata renders the AKS bootstrap contract (Contract) as the custom data an Azure VM
// boots an AKS node image with, and reads it back as the image's own provisioning does.
//
// In the Azure Karpenter provider's self-hosted ("scriptless") mode the custom data is the
// provisioning command itself: a bash script that sets the node bootstrapping variables
// (API_SERVER_NAME, KUBE_CA_CRT, TLS_BOOTSTRAP_TOKEN, KUBELET_FLAGS, KUBELET_NODE_LABELS, …)
// and runs the image's /opt/azure/containers/provision_start.sh, which installs and configures
// the kubelet, containerd, CNI, azure.json, the credential provider and the client CA, then
// starts the kubelet (provider pkg/providers/imagefamily/bootstrap cse_cmd.sh.gtpl; AgentBaker
// cse_cmd.sh). Render writes every value as one single-quoted bash word, so none can end its
// assignment, start a command or expand; Read parses the script with a bash parser
// (mvdan.cc/sh) and applies the checks the image's scripts and the kubelet apply.
package customdata

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"

	"github.com/dovetail-dev/dovetail/shared/apis/validate"
)

// BootstrapKubeconfigPath is where the image's scripts write the kubelet's TLS-bootstrap
// kubeconfig from API_SERVER_NAME, KUBE_CA_CRT and TLS_BOOTSTRAP_TOKEN (AgentBaker
// cse_config.sh configureKubeletServing / ensureKubelet).
const BootstrapKubeconfigPath = "/var/lib/kubelet/bootstrap-kubeconfig"

// MaxBase64Bytes is Azure's limit on osProfile.customData: 87,380 characters of base64
// (64 KiB of data; Compute REST API, OSProfile.customData).
const MaxBase64Bytes = 87380

// Render returns the base64 custom data (what osProfile.customData carries) for c: the
// contract's variables as bash assignments, sorted by name, then the provisioning command.
// Errors, each naming the field: a value Variables refuses, a value bash cannot carry (a NUL
// byte or a carriage return), or data over Azure's limit.
func Render(c Contract) (string, error) {
	vars, err := c.Variables()
	if err != nil {
		return "", err
	}
	return renderVariables(vars)
}

// renderVariables writes the script for a set of variables.
func renderVariables(vars map[string]string) (string, error) {
	names := make([]string, 0, len(vars))
	for n := range vars {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString("#!/bin/bash\n# AKS node bootstrapping variables, read by the node image's provisioning scripts.\nset -o allexport\n")
	for _, n := range names {
		v := vars[n]
		if strings.ContainsAny(v, "\x00\r") {
			return "", fmt.Errorf("custom data: %s holds a NUL or carriage return, which a bash variable cannot carry intact", n)
		}
		// Inside single quotes every byte but the quote is literal (bash manual 3.1.2.2); a
		// quote is written as '\'' (close, escaped quote, reopen).
		fmt.Fprintf(&b, "%s='%s'\n", n, strings.ReplaceAll(v, "'", `'\''`))
	}
	b.WriteString("/usr/bin/nohup /bin/bash -c \"/bin/bash " + ProvisionCommand + "\"\n")
	out := base64.StdEncoding.EncodeToString([]byte(b.String()))
	if len(out) > MaxBase64Bytes {
		return "", fmt.Errorf("custom data: %d base64 characters, Azure allows at most %d", len(out), MaxBase64Bytes)
	}
	return out, nil
}

// ReadVariables reads base64 custom data as bash runs it: the variables assigned before the
// provisioning command runs. Errors: not base64, not bash, no provisioning command, or a
// statement the fake cannot evaluate without running it (an expansion, a pipeline, a
// function); Dovetail never renders one.
func ReadVariables(b64 string) (map[string]string, error) {
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, fmt.Errorf("custom data: not base64: %w", err)
	}
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(string(raw)), "custom-data")
	if err != nil {
		return nil, fmt.Errorf("custom data: not a bash script: %w", err)
	}
	vars := map[string]string{}
	for _, st := range f.Stmts {
		call, ok := st.Cmd.(*syntax.CallExpr)
		if !ok || st.Negated || st.Background || len(st.Redirs) > 0 {
			return nil, fmt.Errorf("custom data: line %d: only assignments and simple commands are read", st.Pos().Line())
		}
		if len(call.Args) == 0 {
			for _, a := range call.Assigns {
				if a.Append || a.Index != nil || a.Array != nil || a.Value == nil {
					return nil, fmt.Errorf("custom data: line %d: %s is not a plain assignment", a.Pos().Line(), a.Name.Value)
				}
				v, err := literalWord(a.Value)
				if err != nil {
					return nil, fmt.Errorf("custom data: %s: %w", a.Name.Value, err)
				}
				vars[a.Name.Value] = v
			}
			continue
		}
		args := make([]string, 0, len(call.Args))
		for _, w := range call.Args {
			a, err := literalWord(w)
			if err != nil {
				return nil, fmt.Errorf("custom data: line %d: %w", w.Pos().Line(), err)
			}
			args = append(args, a)
		}
		if strings.Contains(strings.Join(args, " "), ProvisionCommand) {
			return vars, nil
		}
	}
	return nil, fmt.Errorf("custom data: never runs %s", ProvisionCommand)
}

// literalWord is the value of a word made only of literal text and quotes.
func literalWord(w *syntax.Word) (string, error) {
	var bad syntax.Node
	syntax.Walk(w, func(n syntax.Node) bool {
		switch n.(type) {
		case *syntax.ParamExp, *syntax.CmdSubst, *syntax.ArithmExp, *syntax.ProcSubst, *syntax.ExtGlob, *syntax.BraceExp:
			if bad == nil {
				bad = n
			}
		}
		return bad == nil
	})
	if bad != nil {
		return "", errors.New("expands at run time")
	}
	// Quote removal as bash does it (expand.Literal keeps the backslash of an escaped quote);
	// globbing is off (no ReadDir), and quoted text is one field.
	fields, err := expand.Fields(&expand.Config{}, w)
	if err != nil {
		return "", err
	}
	if len(fields) != 1 {
		return "", fmt.Errorf("%d fields, want one", len(fields))
	}
	return fields[0], nil
}

// Node is what the kubelet an AKS node image configures from the contract registers with.
type Node struct {
	Labels  map[string]string
	Taints  []corev1.Taint
	MaxPods int64
	// Flags are KUBELET_FLAGS by flag name ("--max-pods" to "30").
	Flags map[string]string
	// Variables are all the variables read.
	Variables map[string]string
}

// Read reads the custom data as the node image's provisioning and the kubelet read it, and
// returns the Node the kubelet would register. Errors name the variable: one of
// RequiredVariables missing or empty, a CA that is not base64 PEM certificates (crypto/x509),
// a bootstrap token of the wrong shape, an API server name that is not a DNS name, a label the
// API server or the kubelet refuses (apimachinery validation, IsKubeletLabel), a malformed
// flag, taint or max pods.
func Read(b64 string) (*Node, error) {
	vars, err := ReadVariables(b64)
	if err != nil {
		return nil, err
	}
	return NodeFrom(vars)
}

// NodeFrom is Read for variables already read.
func NodeFrom(vars map[string]string) (*Node, error) {
	var missing []string
	for _, n := range RequiredVariables {
		if vars[n] == "" {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("custom data: %s unset: the node image cannot configure the kubelet", strings.Join(missing, ", "))
	}
	if err := checkCA(vars[VarKubeCACrt]); err != nil {
		return nil, fmt.Errorf("custom data: %s: %w", VarKubeCACrt, err)
	}
	if !tokenPattern.MatchString(vars[VarTLSBootstrap]) {
		return nil, fmt.Errorf("custom data: %s is not a bootstrap token (<6 of [a-z0-9]>.<16 of [a-z0-9]>)", VarTLSBootstrap)
	}
	if msgs := validation.IsDNS1123Subdomain(vars[VarAPIServerName]); len(msgs) > 0 {
		return nil, fmt.Errorf("custom data: %s %q: %s", VarAPIServerName, vars[VarAPIServerName], strings.Join(msgs, "; "))
	}
	n := &Node{Labels: map[string]string{}, Flags: map[string]string{}, Variables: vars}
	// systemd splits $KUBELET_FLAGS on whitespace; each word is --name=value.
	for _, w := range strings.Fields(vars[VarKubeletFlags]) {
		name, v, ok := strings.Cut(w, "=")
		if !ok || !strings.HasPrefix(name, "--") {
			return nil, fmt.Errorf("custom data: %s word %q is not --flag=value", VarKubeletFlags, w)
		}
		n.Flags[name] = v
	}
	for _, kv := range strings.Split(vars[VarKubeletLabels], ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, fmt.Errorf("custom data: %s entry %q is not key=value", VarKubeletLabels, kv)
		}
		n.Labels[k] = v
	}
	errs := validate.Labels(n.Labels, field.NewPath(VarKubeletLabels))
	errs = append(errs, kubeletLabelErrors(n.Labels, field.NewPath(VarKubeletLabels))...)
	if t := n.Flags["--register-with-taints"]; t != "" {
		taints, err := parseTaints(t)
		if err != nil {
			return nil, err
		}
		n.Taints = taints
		errs = append(errs, validate.Taints(taints, field.NewPath("--register-with-taints"), nil)...)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("custom data: the kubelet refuses: %w", errs.ToAggregate())
	}
	mp, err := strconv.ParseInt(n.Flags["--max-pods"], 10, 64)
	if err != nil || mp < 1 {
		return nil, fmt.Errorf("custom data: --max-pods=%q is not a positive integer", n.Flags["--max-pods"])
	}
	n.MaxPods = mp
	if _, err := netip.ParseAddr(n.Flags["--cluster-dns"]); err != nil {
		return nil, fmt.Errorf("custom data: --cluster-dns=%q is not an IP address", n.Flags["--cluster-dns"])
	}
	return n, nil
}

// checkCA: standard base64 (no line breaks) of one or more PEM CERTIFICATE blocks, each an
// X.509 certificate crypto/x509 parses, and nothing else.
func checkCA(b64 string) error {
	if strings.ContainsAny(b64, "\r\n") {
		return errors.New("must be base64 without line breaks")
	}
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return errors.New("not base64")
	}
	certs := 0
	for rest := raw; len(strings.TrimSpace(string(rest))) > 0; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return errors.New("not a PEM certificate bundle")
		}
		if block.Type != "CERTIFICATE" {
			return fmt.Errorf("PEM block %q, want CERTIFICATE", block.Type)
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return fmt.Errorf("certificate %d: %w", certs+1, err)
		}
		certs++
	}
	if certs == 0 {
		return errors.New("no certificate")
	}
	return nil
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

// parseTaints reads --register-with-taints: key[=value]:Effect, comma-separated.
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
