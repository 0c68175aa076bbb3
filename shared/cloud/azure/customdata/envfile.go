package customdata

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// envFile builds /etc/default/kubelet, which systemd reads as the kubelet unit's EnvironmentFile
// and the unit expands into the kubelet's command line: $KUBELET_FLAGS split on whitespace,
// --node-labels=${KUBELET_NODE_LABELS} as one word (AKS node image kubelet.service; systemd.exec
// EnvironmentFile= and "Command lines"). systemd gives quotes, backslashes, '$' and '#' meaning
// in such a file, and the kubelet splits its label and taint lists on ',' and '='. Rather than
// escape for two readers, envFile refuses any word holding a character outside wordChars; every
// word a valid label, taint or flag makes is inside it.
type envFile struct {
	b strings.Builder
}

// wordChars are the characters a word may hold: those of qualified names, label values, taint
// effects, paths, IP addresses and integers, plus the '=', ':' and ',' the kubelet's flag
// syntax itself places between them.
func wordChar(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,", r)
}

// set writes NAME=word word ...: each word checked with wordChar, separated by one space.
func (e *envFile) set(name string, words ...string) error {
	for _, w := range words {
		if i := strings.IndexFunc(w, func(r rune) bool { return !wordChar(r) }); i >= 0 {
			return fmt.Errorf("custom data: %s: %q holds %q, which the kubelet's environment file cannot carry", name, w, w[i:i+1])
		}
	}
	fmt.Fprintf(&e.b, "%s=%s\n", name, strings.Join(words, " "))
	return nil
}

// setList writes NAME=item,item,...: each item a key=value pair whose key and value hold
// neither ',' nor '=' (the kubelet's list syntax), and otherwise only wordChar characters.
func (e *envFile) setList(name string, pairs []string) error {
	for _, p := range pairs {
		k, v, _ := strings.Cut(p, "=")
		if strings.ContainsAny(k, ",=:") || strings.ContainsAny(v, ",=:") || k == "" {
			return fmt.Errorf("custom data: %s: label %q cannot be passed to the kubelet", name, p)
		}
	}
	return e.set(name, strings.Join(pairs, ","))
}

// checkTaints refuses a taint whose key or value holds ',', '=' or ':', which would change how
// the kubelet splits --register-with-taints (key=value:Effect,...).
func (e *envFile) checkTaints(taints []corev1.Taint) error {
	for _, t := range taints {
		if t.Key == "" || strings.ContainsAny(t.Key, ",=:") || strings.ContainsAny(t.Value, ",=:") {
			return fmt.Errorf("custom data: taint %q cannot be passed to the kubelet", t.ToString())
		}
	}
	return nil
}

func (e *envFile) String() string { return e.b.String() }
