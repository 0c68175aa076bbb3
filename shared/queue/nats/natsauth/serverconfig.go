package natsauth

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// publicUserKeyRE is the shape of an nkey user public key: "U" and 55 base32 characters (the
// nkeys encoding of a 32-byte ed25519 key with its prefix and CRC-16). The checksum is left to
// nats-server, which checks it at start.
var publicUserKeyRE = regexp.MustCompile(`^U[A-Z2-7]{55}$`)

// ServerAuthorization renders the "authorization" block of a nats-server configuration for
// cluster: one nkey user per role in keys (role → the user's public key), with For's
// permissions, in Roles order. It is for an operator's own server (dovetail nats-authorization);
// the chart's bundled server renders the same from its template. Errors: an unknown role, a key
// that is not a user public key (a seed, "S...", is refused by name: it must stay secret), no
// keys.
func ServerAuthorization(cluster string, keys map[Role]string) (string, error) {
	if len(keys) == 0 {
		return "", fmt.Errorf("public keys: at least one role's is required (roles %v)", Roles)
	}
	for role, key := range keys {
		if _, err := For(role, cluster); err != nil {
			return "", err
		}
		switch {
		case strings.HasPrefix(key, "S"):
			return "", fmt.Errorf("public key of role %s: %.2s... is an nkey seed, which must stay secret; give its public key (nk -inkey SEED -pubout)", role, key)
		case !publicUserKeyRE.MatchString(key):
			return "", fmt.Errorf("public key of role %s %q: must be an nkey user public key (U and 55 base32 characters)", role, key)
		}
	}
	var b strings.Builder
	b.WriteString("authorization {\n  users: [\n")
	for _, role := range Roles {
		key, ok := keys[role]
		if !ok {
			continue
		}
		p, _ := For(role, cluster)
		var j bytes.Buffer
		enc := json.NewEncoder(&j)
		enc.SetEscapeHTML(false) // ">" is a NATS wildcard, not HTML
		if err := enc.Encode(p); err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "    # %s\n    {nkey: %q, permissions: %s}\n", role, key, strings.TrimSpace(j.String()))
	}
	b.WriteString("  ]\n}\n")
	return b.String(), nil
}
