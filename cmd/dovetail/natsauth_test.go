package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"

	"github.com/dovetail-dev/dovetail/shared/queue/nats/natsauth"
)

// The printed block is a configuration nats-server accepts, admitting each role's key with
// exactly natsauth.For's permissions; a seed is refused without being echoed.
func TestNATSAuthorization(t *testing.T) {
	args := []string{"nats-authorization", "--cluster", "prod"}
	keys := map[string]natsauth.Role{}
	var seed string
	for _, role := range natsauth.Roles {
		kp, err := nkeys.CreateUser()
		if err != nil {
			t.Fatal(err)
		}
		pub, _ := kp.PublicKey()
		s, _ := kp.Seed()
		seed = string(s)
		keys[pub] = role
		args = append(args, "--public-key", string(role)+"="+pub)
	}
	code, out, stderr := runCLI(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	conf := filepath.Join(t.TempDir(), "nats.conf")
	if err := os.WriteFile(conf, []byte("listen: 127.0.0.1:-1\n"+out), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(conf)
	if err != nil {
		t.Fatalf("nats-server refuses the block: %v\n%s", err, out)
	}
	if len(opts.Nkeys) != len(natsauth.Roles) {
		t.Fatalf("%d nkey users, want %d", len(opts.Nkeys), len(natsauth.Roles))
	}
	for _, u := range opts.Nkeys {
		role := keys[u.Nkey]
		want, _ := natsauth.For(role, "prod")
		got := natsauth.Permissions{
			Publish:   natsauth.SubjectPermission{Allow: u.Permissions.Publish.Allow, Deny: u.Permissions.Publish.Deny},
			Subscribe: natsauth.SubjectPermission{Allow: u.Permissions.Subscribe.Allow, Deny: u.Permissions.Subscribe.Deny},
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("role %s: got %+v, want %+v", role, got, want)
		}
	}

	code, out, stderr = runCLI(t, "nats-authorization", "--cluster", "prod", "--public-key", "agent="+seed)
	if code == 0 || !strings.Contains(stderr, "is an nkey seed, which must stay secret") || strings.Contains(stderr+out, seed[2:]) {
		t.Errorf("seed: exit %d, stderr %q", code, stderr)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--public-key", "admin=" + firstKey(keys)}, `nats role "admin"`},
		{[]string{"--public-key", "agent"}, "must be ROLE=PUBLICKEY"},
		{[]string{"--public-key", "agent=UBAD"}, "not a valid nkey user public key"},
		{nil, "at least one role's is required"},
	} {
		code, _, stderr := runCLI(t, append([]string{"nats-authorization", "--cluster", "prod"}, c.args...)...)
		if code == 0 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", c.args, code, stderr, c.want)
		}
	}
}

func firstKey(m map[string]natsauth.Role) string {
	for k := range m {
		return k
	}
	return ""
}
