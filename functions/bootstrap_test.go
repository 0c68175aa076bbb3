// Package functions_test checks what the functions' Lambda bootstraps link: a bootstrap only
// dials its queue, so it must not carry the NATS server (a third of a bootstrap's size, and init
// work on every cold start).
package functions_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// lambdaTags and lambdaEnv are what hack/package.sh builds bootstraps with (provided.al2023).
var (
	lambdaTags = "lambda.norpc"
	lambdaEnv  = []string{"GOOS=linux", "GOARCH=arm64", "CGO_ENABLED=0"}
)

// forbidden are module paths no Lambda bootstrap may link.
var forbidden = []string{"github.com/nats-io/nats-server/"}

func linked(t *testing.T, pkg string) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-tags", lambdaTags, pkg)
	cmd.Env = append(os.Environ(), lambdaEnv...)
	out, err := cmd.Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		t.Fatalf("go list -deps %s: %v\n%s", pkg, err, msg)
	}
	return strings.Fields(string(out))
}

func forbiddenIn(deps []string) []string {
	var bad []string
	for _, d := range deps {
		for _, f := range forbidden {
			if strings.HasPrefix(d, f) {
				bad = append(bad, d)
			}
		}
	}
	return bad
}

func TestLambdaBootstrapsLinkNoNATSServer(t *testing.T) {
	mains, err := filepath.Glob("*/cmd/*")
	if err != nil || len(mains) < 5 {
		t.Fatalf("function mains %v (%v), want provision, consolidate, drift, interruption, lifecycle at least", mains, err)
	}
	for _, m := range mains {
		pkg := "./" + filepath.ToSlash(m)
		if bad := forbiddenIn(linked(t, pkg)); len(bad) > 0 {
			t.Errorf("%s links %d packages of the NATS server under -tags %s, e.g. %s; keep natsembed out of its imports",
				pkg, len(bad), lambdaTags, bad[0])
		}
	}
	// The check sees the server where it is linked: local dev embeds it.
	if bad := forbiddenIn(linked(t, "../localdev")); len(bad) == 0 {
		t.Error("localdev links no nats-server package by this listing: the check would miss one")
	}
}
