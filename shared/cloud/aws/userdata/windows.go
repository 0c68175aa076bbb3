package userdata

// Windows user data: a PowerShell script that EC2Launch runs at first boot, calling the EKS
// bootstrap script of the EKS-optimized Windows AMIs, as Karpenter's AWS provider writes it
// (pkg/providers/amifamily/bootstrap/windows.go, v1.14):
//
//	<powershell>
//	<the NodeClass's spec.userData, when set>
//	[string]$EKSBootstrapScriptFile = "$env:ProgramFiles\Amazon\EKS\Start-EKSBootstrap.ps1"
//	& $EKSBootstrapScriptFile -EKSClusterName '<name>' -APIServerEndpoint '<url>' -Base64ClusterCA '<ca>' -KubeletExtraArgs '<flags>' -DNSClusterIP '<ip>'
//	</powershell>
//
// The parameters are Start-EKSBootstrap.ps1's (Amazon EKS User Guide, "Bootstrap script
// configuration parameters" for Windows): -EKSClusterName (mandatory), -APIServerEndpoint,
// -Base64ClusterCA, -KubeletExtraArgs, -KubeProxyExtraArgs, -DNSClusterIP, -ServiceCIDR,
// -ExcludedSnatCIDRs, -ContainerRuntime. EC2Launch runs only what stands between the
// <powershell> and </powershell> tags (EC2Launch v2 user guide, "User data scripts").

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

const (
	psOpen  = "<powershell>"
	psClose = "</powershell>"
	// windowsBootstrapAssign names the EKS bootstrap script of the Windows AMIs in a variable, as
	// Karpenter's user data does; the call is "& $EKSBootstrapScriptFile ...".
	windowsBootstrapAssign = `[string]$EKSBootstrapScriptFile = "$env:ProgramFiles\Amazon\EKS\Start-EKSBootstrap.ps1"`
	windowsBootstrapCall   = "& $EKSBootstrapScriptFile"
)

// windowsParams are Start-EKSBootstrap.ps1's parameters; PowerShell refuses a call naming any
// other ("A parameter cannot be found that matches parameter name").
var windowsParams = map[string]bool{
	"-EKSClusterName": true, "-APIServerEndpoint": true, "-Base64ClusterCA": true, "-KubeletExtraArgs": true,
	"-KubeProxyExtraArgs": true, "-DNSClusterIP": true, "-ServiceCIDR": true, "-ExcludedSnatCIDRs": true, "-ContainerRuntime": true,
}

// psQuote returns s as one single-quoted PowerShell string: inside single quotes nothing
// expands, and a quote is written twice (about_Quoting_Rules, "Including quote characters in
// a string"). PowerShell also takes the typographic single quotes U+2018, U+2019, U+201A and
// U+201B as quote characters, so each of those is doubled the same way.
func psQuote(s string) string {
	var b strings.Builder
	b.WriteByte('\'')
	for _, r := range s {
		if isPSSingleQuote(r) {
			b.WriteRune(r)
		}
		b.WriteRune(r)
	}
	b.WriteByte('\'')
	return b.String()
}

func isPSSingleQuote(r rune) bool {
	return r == '\'' || r == '\u2018' || r == '\u2019' || r == '\u201a' || r == '\u201b'
}

// kubeletMapKey and kubeletMapValue bound what a kubelet map flag (--kube-reserved,
// --system-reserved, --eviction-hard) carries: resource names or eviction signals, and
// quantities or percentages; nothing that could end the flag or the quoted string.
var (
	kubeletMapKey   = regexp.MustCompile(`^[a-z0-9]([a-z0-9.\-/]*[a-z0-9])?$`)
	kubeletMapValue = regexp.MustCompile(`^[0-9][0-9A-Za-z.]*%?$`)
)

// windowsKubeletArgs are the kubelet flags of -KubeletExtraArgs, in Karpenter's order
// (bootstrap.go kubeletExtraArgs): labels, taints, max pods, pods per core, system-reserved,
// kube-reserved, eviction-hard; map entries sorted by key. Errors name the field.
func windowsKubeletArgs(s Spec) ([]string, error) {
	var args []string
	if len(s.Labels) > 0 {
		args = append(args, `--node-labels="`+LabelsFlag(s.Labels)+`"`)
	}
	if len(s.Taints) > 0 {
		args = append(args, `--register-with-taints="`+TaintsFlag(s.Taints)+`"`)
	}
	k := s.Kubelet
	if k == nil {
		return args, nil
	}
	if k.MaxPods != nil {
		args = append(args, "--max-pods="+strconv.Itoa(int(*k.MaxPods)))
	}
	if k.PodsPerCore != nil {
		args = append(args, "--pods-per-core="+strconv.Itoa(int(*k.PodsPerCore)))
	}
	for _, m := range []struct {
		flag, field, sep string
		m                map[string]string
	}{{"--system-reserved", "kubelet.systemReserved", "=", k.SystemReserved}, {"--kube-reserved", "kubelet.kubeReserved", "=", k.KubeReserved},
		{"--eviction-hard", "kubelet.evictionHard", "<", k.EvictionHard}} {
		if len(m.m) == 0 {
			continue
		}
		parts := make([]string, 0, len(m.m))
		for _, key := range sortedKeys(m.m) {
			v := m.m[key]
			if !kubeletMapKey.MatchString(key) || !kubeletMapValue.MatchString(v) {
				return nil, fmt.Errorf("%s[%q]: %q is not a resource or signal with a quantity or percentage", m.field, key, v)
			}
			parts = append(parts, key+m.sep+v)
		}
		args = append(args, m.flag+`="`+strings.Join(parts, ",")+`"`)
	}
	return args, nil
}

// renderWindows writes the PowerShell user data of the Windows families. Every value is one
// single-quoted PowerShell string (psQuote); the NodeClass's userData is PowerShell by contract
// and runs as written before the bootstrap, but may not hold the <powershell> tags: EC2Launch
// would end the script at its </powershell> and never run the bootstrap.
func renderWindows(s Spec) (string, error) {
	if err := s.texts(); err != nil {
		return "", err
	}
	if lc := strings.ToLower(s.Custom); strings.Contains(lc, psOpen) || strings.Contains(lc, psClose) {
		return "", fmt.Errorf("spec.userData: holds a %s or %s tag; Windows user data is PowerShell that Dovetail wraps in those tags itself", psOpen, psClose)
	}
	args, err := windowsKubeletArgs(s)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString(psOpen + "\n")
	if s.Custom != "" {
		b.WriteString(s.Custom)
		if !strings.HasSuffix(s.Custom, "\n") {
			b.WriteByte('\n')
		}
	}
	b.WriteString(windowsBootstrapAssign + "\n")
	b.WriteString(windowsBootstrapCall)
	b.WriteString(" -EKSClusterName " + psQuote(s.ClusterName) + " -APIServerEndpoint " + psQuote(s.APIServerEndpoint))
	b.WriteString(" -Base64ClusterCA " + psQuote(s.CertificateAuthority))
	if len(args) > 0 {
		b.WriteString(" -KubeletExtraArgs " + psQuote(strings.Join(args, " ")))
	}
	if s.Kubelet != nil && len(s.Kubelet.ClusterDNS) > 0 {
		b.WriteString(" -DNSClusterIP " + psQuote(s.Kubelet.ClusterDNS[0]))
	}
	if s.ServiceCIDR != "" {
		b.WriteString(" -ServiceCIDR " + psQuote(s.ServiceCIDR))
	}
	b.WriteString("\n" + psClose)
	return b.String(), nil
}

// parseWindows reads Windows user data as the node runs it: EC2Launch takes the script between
// the first <powershell> and the </powershell> after it (anything else is not run, so user data
// without the tags boots no kubelet), and the node joins through the one call of the EKS
// bootstrap script, named by the $EKSBootstrapScriptFile variable as Karpenter writes it or by
// its path in quotes. The call's parameters are single-quoted strings; KubeletExtraArgs are the
// kubelet's flags, split on whitespace. Errors: no script, no bootstrap call or more than one, a
// parameter Start-EKSBootstrap.ps1 does not have, a value that is not one quoted string, no
// cluster name, or a kubelet flag that does not parse.
func parseWindows(data string) (*Node, error) {
	lower := strings.ToLower(data)
	open := strings.Index(lower, psOpen)
	if open < 0 {
		return nil, errors.New("user data of a Windows node: no <powershell> script, the node cannot join")
	}
	rest := data[open+len(psOpen):]
	end := strings.Index(strings.ToLower(rest), psClose)
	if end < 0 {
		return nil, errors.New("user data of a Windows node: <powershell> is never closed by </powershell>, EC2Launch runs nothing")
	}
	body := rest[:end]
	var call string
	varSet := false
	for _, line := range strings.Split(strings.ReplaceAll(body, "\r\n", "\n"), "\n") {
		l := strings.TrimSpace(line)
		switch {
		case l == windowsBootstrapAssign:
			varSet = true
		case strings.HasPrefix(l, windowsBootstrapCall+" ") || isQuotedBootstrapCall(l):
			if call != "" {
				return nil, errors.New("user data of a Windows node: Start-EKSBootstrap.ps1 is called twice")
			}
			if strings.HasPrefix(l, windowsBootstrapCall+" ") && !varSet {
				return nil, errors.New("user data of a Windows node: $EKSBootstrapScriptFile is called before it names Start-EKSBootstrap.ps1")
			}
			call = l
		}
	}
	if call == "" {
		return nil, errors.New("user data of a Windows node: no call of Start-EKSBootstrap.ps1, the node cannot join")
	}
	words, err := psWords(call)
	if err != nil {
		return nil, fmt.Errorf("user data of a Windows node: bootstrap call: %w", err)
	}
	params := map[string]string{}
	for i := 2; i < len(words); i += 2 {
		name := words[i].text
		if words[i].quoted || !strings.HasPrefix(name, "-") {
			return nil, fmt.Errorf("user data of a Windows node: bootstrap call: %q is not a parameter name", name)
		}
		canon := ""
		for p := range windowsParams {
			if strings.EqualFold(p, name) { // PowerShell parameter names are case-insensitive
				canon = p
			}
		}
		if canon == "" {
			return nil, fmt.Errorf("user data of a Windows node: Start-EKSBootstrap.ps1 has no parameter %s", name)
		}
		if i+1 >= len(words) {
			return nil, fmt.Errorf("user data of a Windows node: bootstrap parameter %s has no value", name)
		}
		if _, dup := params[canon]; dup {
			return nil, fmt.Errorf("user data of a Windows node: bootstrap parameter %s is given twice", canon)
		}
		params[canon] = words[i+1].text
	}
	n := &Node{ClusterName: params["-EKSClusterName"], APIServerEndpoint: params["-APIServerEndpoint"]}
	if n.ClusterName == "" {
		return nil, errors.New("user data of a Windows node: Start-EKSBootstrap.ps1 -EKSClusterName is missing, the node cannot join")
	}
	if err := n.applyWindowsKubeletArgs(params["-KubeletExtraArgs"]); err != nil {
		return nil, fmt.Errorf("user data of a Windows node: -KubeletExtraArgs: %w", err)
	}
	if ip := params["-DNSClusterIP"]; ip != "" {
		if n.Kubelet == nil {
			n.Kubelet = &apisv1.KubeletConfiguration{}
		}
		n.Kubelet.ClusterDNS = []string{ip}
	}
	return n, nil
}

// isQuotedBootstrapCall reports "& '<...>\Start-EKSBootstrap.ps1' ..." or the same in double quotes.
func isQuotedBootstrapCall(l string) bool {
	if !strings.HasPrefix(l, "& ") {
		return false
	}
	w := strings.TrimSpace(l[2:])
	if w == "" || (w[0] != '\'' && w[0] != '"') {
		return false
	}
	end := strings.IndexByte(w[1:], w[0])
	return end >= 0 && strings.HasSuffix(strings.ToLower(w[1:1+end]), `\amazon\eks\start-eksbootstrap.ps1`)
}

type psWord struct {
	text   string
	quoted bool
}

// psWords splits one PowerShell command line into words: bare words end at whitespace,
// single-quoted strings are literal with ” for a quote (about_Quoting_Rules), and a
// double-quoted string is taken only as the script path (word 1): a double-quoted value would
// expand $variables and subexpressions, which a parameter value here must not.
func psWords(l string) ([]psWord, error) {
	var out []psWord
	i := 0
	for i < len(l) {
		switch c := l[i]; {
		case c == ' ' || c == '\t':
			i++
		case c == '\'' || strings.HasPrefix(l[i:], "\u2018") || strings.HasPrefix(l[i:], "\u2019"):
			var b strings.Builder
			_, size := firstRune(l[i:])
			j := i + size
			closed := false
			for j < len(l) {
				r, sz := firstRune(l[j:])
				if isPSSingleQuote(r) {
					if r2, sz2 := firstRune(l[j+sz:]); j+sz < len(l) && isPSSingleQuote(r2) {
						b.WriteRune(r2)
						j += sz + sz2
						continue
					}
					j += sz
					closed = true
					break
				}
				b.WriteRune(r)
				j += sz
			}
			if !closed {
				return nil, errors.New("a single-quoted string is not closed")
			}
			out = append(out, psWord{text: b.String(), quoted: true})
			i = j
		case c == '"':
			if len(out) != 1 {
				return nil, fmt.Errorf("word %d is a double-quoted (expanding) string; the bootstrap's values are single-quoted", len(out))
			}
			end := strings.IndexByte(l[i+1:], '"')
			if end < 0 {
				return nil, errors.New("a double-quoted string is not closed")
			}
			out = append(out, psWord{text: l[i+1 : i+1+end], quoted: true})
			i += end + 2
		default:
			j := i
			for j < len(l) && l[j] != ' ' && l[j] != '\t' {
				if l[j] == '\'' || l[j] == '"' || l[j] == ';' || l[j] == '|' || l[j] == '`' {
					return nil, fmt.Errorf("%q: a bare word holds %q", l[i:], l[j])
				}
				j++
			}
			out = append(out, psWord{text: l[i:j]})
			i = j
		}
	}
	return out, nil
}

func firstRune(s string) (rune, int) {
	for _, r := range s {
		return r, len(string(r))
	}
	return 0, 0
}

// applyWindowsKubeletArgs reads the kubelet flags of -KubeletExtraArgs: whitespace-separated
// --flag=value words, a value optionally in double quotes (as Karpenter writes them, %q).
// --node-labels, --register-with-taints and --max-pods go through applyFlags; --kube-reserved,
// --system-reserved and --eviction-hard (key=value or signal<value lists) set the allocatable
// settings; other flags are the kubelet's and change nothing modelled here.
func (n *Node) applyWindowsKubeletArgs(v string) error {
	var flags []string
	for _, f := range strings.Fields(v) {
		name, val, ok := strings.Cut(f, "=")
		if !ok || !strings.HasPrefix(name, "--") {
			return fmt.Errorf("%q is not --flag=value", f)
		}
		if strings.HasPrefix(val, `"`) {
			if len(val) < 2 || !strings.HasSuffix(val, `"`) || strings.Count(val, `"`) != 2 {
				return fmt.Errorf("%s: %s is not one double-quoted value", name, val)
			}
			val = val[1 : len(val)-1]
		}
		switch name {
		case "--register-with-taints":
			if val == "" { // Karpenter writes --register-with-taints="" for a node without taints
				continue
			}
		case "--kube-reserved", "--system-reserved", "--eviction-hard":
			sep := "="
			if name == "--eviction-hard" {
				sep = "<"
			}
			m := map[string]string{}
			for _, kv := range strings.Split(val, ",") {
				k, x, ok := strings.Cut(kv, sep)
				if !ok || k == "" || x == "" {
					return fmt.Errorf("%s: %q is not key%svalue", name, kv, sep)
				}
				m[k] = x
			}
			if n.Kubelet == nil {
				n.Kubelet = &apisv1.KubeletConfiguration{}
			}
			switch name {
			case "--kube-reserved":
				n.Kubelet.KubeReserved = m
			case "--system-reserved":
				n.Kubelet.SystemReserved = m
			default:
				n.Kubelet.EvictionHard = m
			}
			continue
		case "--pods-per-core":
			p, err := strconv.ParseInt(val, 10, 32)
			if err != nil {
				return fmt.Errorf("--pods-per-core: %w", err)
			}
			if n.Kubelet == nil {
				n.Kubelet = &apisv1.KubeletConfiguration{}
			}
			pp := int32(p)
			n.Kubelet.PodsPerCore = &pp
			continue
		}
		flags = append(flags, name+"="+val)
	}
	return n.applyFlags(flags)
}
