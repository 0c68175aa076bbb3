package natsauth

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	seed := filepath.Join(dir, "seed")
	if err := os.WriteFile(seed, []byte("SU..."), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		c       Client
		url     string
		wantTLS bool
		wantErr string
	}{
		{"no credentials", Client{}, "nats://nats.dovetail.svc:4222", false, "--nats-creds or --nats-nkey-seed: required"},
		{"both credentials", Client{CredsFile: seed, NkeySeedFile: seed}, "nats://n:4222", false, "--nats-creds and --nats-nkey-seed: give one, not both"},
		{"cert without key", Client{NkeySeedFile: seed, TLSCertFile: seed}, "nats://n:4222", false, "--nats-tls-cert and --nats-tls-key: give both or neither"},
		{"missing seed file", Client{NkeySeedFile: filepath.Join(dir, "absent")}, "nats://n:4222", false, "--nats-nkey-seed " + filepath.Join(dir, "absent")},
		{"directory as CA", Client{NkeySeedFile: seed, TLSCAFile: dir}, "nats://n:4222", false, "--nats-tls-ca " + dir + ": not a regular file"},
		{"bad url", Client{NkeySeedFile: seed}, "nats://:4222", false, `nats url "nats://:4222": not a URL with a host`},
		// Remote server: TLS is required even without a CA (the system roots verify it).
		{"remote needs TLS", Client{NkeySeedFile: seed}, "nats://nats.dovetail.svc:4222", true, ""},
		{"one remote in a list", Client{NkeySeedFile: seed}, "nats://127.0.0.1:4222,nats://10.0.0.5:4222", true, ""},
		{"loopback plain", Client{NkeySeedFile: seed}, "nats://127.0.0.1:4222,localhost:4222,nats://[::1]:4222", false, ""},
		{"loopback with CA", Client{NkeySeedFile: seed, TLSCAFile: seed}, "nats://127.0.0.1:4222", true, ""},
		{"insecure opt-out", Client{InsecureNoAuth: true}, "nats://nats.dovetail.svc:4222", false, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tls, err := c.c.Check(c.url)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err = %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil || tls != c.wantTLS {
				t.Fatalf("Check = %v, %v; want %v, nil", tls, err, c.wantTLS)
			}
		})
	}
}

// Each role's grants, checked against the table in docs/install.md: the DaemonSet may publish
// notices only; only the function role may publish commands; nobody may delete or purge.
func TestForLeastPrivilege(t *testing.T) {
	publishers := map[string][]Role{}
	for _, role := range Roles {
		p, err := For(role, "prod")
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range p.Publish.Allow {
			publishers[s] = append(publishers[s], role)
			if strings.Contains(s, ".DELETE.") || strings.Contains(s, ".PURGE.") || s == ">" || strings.HasPrefix(s, "$JS.API.>") {
				t.Errorf("%s may publish %s", role, s)
			}
		}
		if want := []string{InboxPrefix("prod", role) + ".>"}; !slices.Equal(p.Subscribe.Allow, want) {
			t.Errorf("%s subscribe %v, want %v", role, p.Subscribe.Allow, want)
		}
	}
	for subject, want := range map[string][]Role{
		"dovetail.prod.commands": {RoleFunction},
		"dovetail.prod.events":   {RoleAgent},
		"dovetail.prod.notices":  {RoleScheduledEvents},
		"dovetail.prod.audit":    {RoleFunction},
		"dovetail.prod.dlq":      {RoleAgent, RoleFunction},
	} {
		if got := publishers[subject]; !slices.Equal(got, want) {
			t.Errorf("publishers of %s: %v, want %v", subject, got, want)
		}
	}
	if p, _ := For(RoleScheduledEvents, "prod"); !slices.Equal(p.Publish.Allow, []string{"dovetail.prod.notices"}) {
		t.Errorf("scheduled-events publishes %v, want notices only", p.Publish.Allow)
	}
	if _, err := For("admin", "prod"); err == nil || !strings.Contains(err.Error(), `nats role "admin"`) {
		t.Errorf("For(admin) err = %v", err)
	}
	if _, err := For(RoleAgent, "Prod.x"); err == nil || !strings.Contains(err.Error(), `cluster "Prod.x"`) {
		t.Errorf("For(agent, Prod.x) err = %v", err)
	}
}
