// Package functions_test checks what the functions' Lambda bootstraps link: a bootstrap only
// reads its queue and runs on AWS, so it must not carry the NATS server or client, Prometheus,
// the Azure SDK, the Azure catalog data, the manifest decoder or the SDK's default credential
// chain (size, and init work on every cold start).
package functions_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// lambdaTags, lambdaGCFlags and lambdaEnv are what hack/package.sh builds bootstraps with
// (provided.al2023; LAMBDA_TAGS, LAMBDA_GCFLAGS).
var (
	lambdaTags    = "lambda.norpc"
	lambdaGCFlags = "github.com/aws/...=-l"
	lambdaEnv     = []string{"GOOS=linux", "GOARCH=arm64", "CGO_ENABLED=0"}
)

// forbidden are package path prefixes no Lambda bootstrap may link: the NATS server (local dev
// embeds it) and client, Prometheus and protobuf (the NATS worker mode and its /metrics: the
// Lambda build has neither), the Azure SDK (the Azure Functions mode and the Azure cloud, with
// azblob's Arrow and go-json; a Lambda runs only on AWS), client-go's scheme of every Kubernetes
// API group, and shared/manifests with its serializers (a function decodes no manifests). Together
// they were over a third of a bootstrap (docs/benchmarks.md, "Lambda bootstraps").
var forbidden = []string{"github.com/nats-io/", "github.com/prometheus/", "google.golang.org/protobuf/",
	"github.com/Azure/azure-sdk-for-go/", "github.com/apache/arrow-go/", "k8s.io/client-go/kubernetes",
	"github.com/dovetail-dev/dovetail/shared/manifests"}

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
			t.Errorf("%s links %d forbidden packages under -tags %s, e.g. %s; keep NATS, Prometheus, the Azure SDK, client-go's scheme and shared/manifests out of its Lambda build",
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

// unlinked are symbols that are in their packages but must not be in a Lambda bootstrap: the
// embedded Azure catalog data (the AWS catalog's loaders do not read it; shared/catalog's lazy
// loaders keep it out) and the SDK's default config chain with its SSO, sign-in and STS
// credential providers (awsconfig.Load is FromEnvironment in the Lambda build).
var unlinked = []string{
	"github.com/dovetail-dev/dovetail/shared/catalog.azureSizesZstd", "github.com/dovetail-dev/dovetail/shared/catalog.azurePricesZstd",
	"github.com/dovetail-dev/dovetail/shared/catalog.azureSKUsEastUS", "github.com/dovetail-dev/dovetail/shared/catalog.azureSKUsSouthCentralUS",
	"github.com/dovetail-dev/dovetail/shared/catalog.azureSKUsWestCentralUS",
	"github.com/aws/aws-sdk-go-v2/config.LoadDefaultConfig", "github.com/aws/aws-sdk-go-v2/config.resolveCredentialChain",
}

// packageOf is the import path of a package-level symbol: up to the first dot after the last slash.
func packageOf(sym string) string {
	slash := strings.LastIndex(sym, "/")
	return sym[:slash+strings.Index(sym[slash:], ".")]
}

// symbols lists the symbol names of an object file or binary (go tool nm).
func symbols(t *testing.T, file string) map[string]bool {
	t.Helper()
	out, err := exec.Command("go", "tool", "nm", file).Output()
	if err != nil {
		t.Fatalf("go tool nm %s: %v", file, err)
	}
	syms := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) >= 3 {
			syms[f[len(f)-1]] = true
		}
	}
	return syms
}

// Every main built as a Lambda bootstrap (for this machine, so it can run) links none of the
// unlinked symbols, which its packages' objects do hold (so the check cannot pass on a renamed
// symbol); and the bootstrap started outside Lambda says it has no NATS worker mode instead of
// dialling NATS.
func TestLambdaBootstrapsLinkNoAzureDataOrCredentialChain(t *testing.T) {
	if testing.Short() {
		t.Skip("links every function's bootstrap")
	}
	mains, err := filepath.Glob("*/cmd/*")
	if err != nil || len(mains) < 5 {
		t.Fatalf("function mains %v (%v)", mains, err)
	}
	for _, sym := range unlinked {
		out, err := exec.Command("go", "list", "-export", "-tags", lambdaTags, "-f", "{{.Export}}", packageOf(sym)).Output()
		if err != nil {
			t.Fatalf("go list -export %s: %v", packageOf(sym), err)
		}
		if !symbols(t, strings.TrimSpace(string(out)))[sym] {
			t.Fatalf("%s has no symbol %s: the check below would miss it", packageOf(sym), sym)
		}
	}
	dir := t.TempDir()
	args := []string{"build", "-tags", lambdaTags, "-o", dir + string(filepath.Separator)}
	for _, m := range mains {
		args = append(args, "./"+filepath.ToSlash(m))
	}
	if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	for _, m := range mains {
		bin := filepath.Join(dir, filepath.Base(m))
		have := symbols(t, bin)
		for _, sym := range unlinked {
			if have[sym] {
				t.Errorf("%s links %s under -tags %s", m, sym, lambdaTags)
			}
		}
	}
	// Outside Lambda (no AWS_LAMBDA_RUNTIME_API) the process would be a NATS worker.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(dir, filepath.Base(mains[0])))
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k != "AWS_LAMBDA_RUNTIME_API" && k != "FUNCTIONS_CUSTOMHANDLER_PORT" && !strings.HasPrefix(k, "DOVETAIL_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "DOVETAIL_CLUSTER=c1", "DOVETAIL_NATS_URL=nats://127.0.0.1:1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	const want = "AWS_LAMBDA_RUNTIME_API is not set, so this runs as a NATS worker, but this binary is the Lambda build (-tags lambda.norpc), which has no NATS worker mode"
	if err := cmd.Run(); err == nil || !strings.Contains(stderr.String(), want) {
		t.Errorf("%s outside Lambda: %v, stderr %q; want exit 1 saying %q", mains[0], err, stderr.String(), want)
	}
}
