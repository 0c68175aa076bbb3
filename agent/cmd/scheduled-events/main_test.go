package main

import (
	"io"
	"os"
	"path"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"
)

// Bad flags are refused before anything is polled or published, naming the flag.
func TestFlagsNameTheField(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--cluster=Prod_EU"}, "--cluster"},
		{[]string{"--cluster=prod", "--transport=kafka"}, `--transport "kafka"`},
		{[]string{"--cluster=prod", "--transport=eventgrid"}, "--eventgrid-notices-topic-endpoint: required"},
		// NATS without credentials: refused before dialing (the server would admit a forger).
		{[]string{"--cluster=prod", "--nats-url=nats://nats.dovetail-system.svc:4222"}, "--nats-creds or --nats-nkey-seed: required"},
	} {
		cmd := newCommand()
		cmd.SetArgs(c.args)
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error with %q", c.args, err, c.want)
		}
	}
}

// The raw DaemonSet manifest (agent/scheduled-events.yaml) parses with this command's flags, and
// its NATS credential and CA flags name files inside its read-only Secret mounts.
func TestManifestArgsParse(t *testing.T) {
	b, err := os.ReadFile("../../scheduled-events.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var ds appsv1.DaemonSet
	if err := yaml.UnmarshalStrict(b, &ds); err != nil {
		t.Fatal(err)
	}
	ctr := ds.Spec.Template.Spec.Containers[0]
	cmd := newCommand()
	if err := cmd.ParseFlags(ctr.Args); err != nil {
		t.Fatalf("%v: %q", err, ctr.Args)
	}
	mounts := map[string]bool{}
	for _, m := range ctr.VolumeMounts {
		if m.ReadOnly {
			mounts[m.MountPath] = true
		}
	}
	for _, flag := range []string{"nats-nkey-seed", "nats-tls-ca"} {
		v := cmd.Flags().Lookup(flag).Value.String()
		if v == "" || !mounts[path.Dir(v)] {
			t.Errorf("--%s %q: not in a read-only mount of %v", flag, v, mounts)
		}
	}
}
