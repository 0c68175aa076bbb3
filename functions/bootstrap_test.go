// Package functions_test checks what the functions' Lambda bootstraps link: a bootstrap only
// dials its queue and runs on AWS, so it must not carry the NATS server, the Azure SDK or
// client-go's full scheme (size, and init work on every cold start).
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

// forbidden are package path prefixes no Lambda bootstrap may link: the NATS server (local dev
// embeds it), the Azure SDK (the Azure Functions mode and the Azure cloud, with azblob's Arrow
// and go-json; a Lambda runs only on AWS) and client-go's scheme of every Kubernetes API group
// (shared/manifests decodes with a scheme of only the groups it reads). Together they were over a
// third of a bootstrap (README "Lambda bootstraps").
var forbidden = []string{"github.com/nats-io/nats-server/", "github.com/Azure/azure-sdk-for-go/", "github.com/apache/arrow-go/",
	"k8s.io/client-go/kubernetes"}

func linked(t *testing.T, pkg string) []string { return listDeps(t, pkg, lambdaTags) }

func listDeps(t *testing.T, pkg, tags string) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-tags", tags, pkg)
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
			t.Errorf("%s links %d forbidden packages under -tags %s, e.g. %s; keep natsembed, the Azure SDK and client-go's scheme out of its Lambda build",
				pkg, len(bad), lambdaTags, bad[0])
		}
		// The same main built without the tag (NATS worker, Azure Functions custom handler)
		// keeps the Azure Functions mode and the Azure cloud.
		if !hasPrefix(listDeps(t, pkg, ""), "github.com/Azure/azure-sdk-for-go/sdk/storage/azblob") ||
			!hasPrefix(listDeps(t, pkg, ""), "github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute") {
			t.Errorf("%s without -tags %s links no azblob or armcompute: its Azure Functions build lost the Azure mode or cloud", pkg, lambdaTags)
		}
	}
	// The check sees the server where it is linked: local dev embeds it.
	if bad := forbiddenIn(linked(t, "../localdev")); len(bad) == 0 {
		t.Error("localdev links no nats-server package by this listing: the check would miss one")
	}
}

func hasPrefix(deps []string, prefix string) bool {
	for _, d := range deps {
		if strings.HasPrefix(d, prefix) {
			return true
		}
	}
	return false
}
