package main

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The app infra/azure deploys is read back from the zips this tool writes and checked against the
// fields "Azure Functions custom handlers" documents: host.json at the root (version 2.0, a
// customHandler whose description.defaultExecutablePath is the executable at the root, the
// extension bundle for non-HTTP triggers), one folder per function named after it holding a
// function.json whose one binding is an eventGridTrigger "in" named "event" (the key the runtime
// reads the event from), and the handler binary, executable. The handler here is a stand-in ELF
// file: building five function binaries is make package-azure's job.

const appDir = "../../infra/azure/app"

// routes are each function's folders: shared/runtime serves /<function>, and the interruption
// function's own subject is the notices, so the agent's events come on /interruption-events.
var routes = map[string][]string{
	"provision": {"provision"}, "consolidate": {"consolidate"}, "drift": {"drift"},
	"interruption": {"interruption", "interruption-events"}, "lifecycle": {"lifecycle"},
}

func fakeHandler(t *testing.T) (string, []byte) {
	t.Helper()
	bin := append([]byte("\x7fELF\x02\x01\x01"), bytes.Repeat([]byte{0}, 64)...)
	path := filepath.Join(t.TempDir(), "handler")
	if err := os.WriteFile(path, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	return path, bin
}

func TestEveryFunctionPackages(t *testing.T) {
	// Every function main of the repository has its routes here (a new function needs its app).
	mains, err := filepath.Glob("../../functions/*/cmd/*")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range mains {
		names = append(names, filepath.Base(m))
	}
	slices.Sort(names)
	if want := []string{"consolidate", "drift", "interruption", "lifecycle", "provision"}; !slices.Equal(names, want) {
		t.Fatalf("function mains %v; the routes table knows %v", names, want)
	}
	handler, bin := fakeHandler(t)
	for fn, folders := range routes {
		out := filepath.Join(t.TempDir(), fn+"-azure.zip")
		if err := Package(out, appDir, fn, handler); err != nil {
			t.Fatalf("%s: %v", fn, err)
		}
		zr, err := zip.OpenReader(out)
		if err != nil {
			t.Fatal(err)
		}
		files := map[string]*zip.File{}
		var got []string
		for _, f := range zr.File {
			files[f.Name] = f
			got = append(got, f.Name)
		}
		want := []string{"host.json", "handler"}
		for _, d := range folders {
			want = append(want, d+"/function.json")
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("%s: entries %v, want %v", fn, got, want)
		}

		var host struct {
			Version       string
			CustomHandler struct {
				Description struct {
					DefaultExecutablePath string
					Arguments             []string
				}
				EnableForwardingHTTPRequest bool `json:"enableForwardingHttpRequest"`
			}
			ExtensionBundle struct{ ID, Version string }
		}
		readJSON(t, files["host.json"], &host)
		if host.Version != "2.0" || host.CustomHandler.Description.DefaultExecutablePath != "handler" || len(host.CustomHandler.Description.Arguments) != 0 ||
			host.CustomHandler.EnableForwardingHTTPRequest || host.ExtensionBundle.ID != "Microsoft.Azure.Functions.ExtensionBundle" || !strings.HasPrefix(host.ExtensionBundle.Version, "[4.") {
			t.Errorf("%s: host.json %+v", fn, host)
		}
		for _, d := range folders {
			var fj struct {
				Bindings []map[string]any
			}
			readJSON(t, files[d+"/function.json"], &fj)
			if len(fj.Bindings) != 1 || fj.Bindings[0]["type"] != "eventGridTrigger" || fj.Bindings[0]["direction"] != "in" || fj.Bindings[0]["name"] != "event" || len(fj.Bindings[0]) != 3 {
				t.Errorf("%s: %s/function.json bindings %v", fn, d, fj.Bindings)
			}
		}
		h := files["handler"]
		if h.Mode().Perm() != 0o755 || h.Mode().IsDir() {
			t.Errorf("%s: handler mode %v, want -rwxr-xr-x", fn, h.Mode())
		}
		if b := read(t, h); !bytes.Equal(b, bin) {
			t.Errorf("%s: handler is not the binary given", fn)
		}
		zr.Close()
	}
}

// TestSameInputsSameZip: fixed times and order, so a rebuild of the same binary is the same
// package (and the same hash where it is uploaded).
func TestSameInputsSameZip(t *testing.T) {
	handler, _ := fakeHandler(t)
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.zip"), filepath.Join(dir, "b.zip")
	if err := Package(a, appDir, "interruption", handler); err != nil {
		t.Fatal(err)
	}
	if err := Package(b, appDir, "interruption", handler); err != nil {
		t.Fatal(err)
	}
	x, _ := os.ReadFile(a)
	y, _ := os.ReadFile(b)
	if !bytes.Equal(x, y) {
		t.Fatal("two packages of the same inputs differ")
	}
}

func TestRefusals(t *testing.T) {
	handler, _ := fakeHandler(t)
	app := func(host, fn string) string {
		d := t.TempDir()
		if err := os.WriteFile(filepath.Join(d, "host.json"), []byte(host), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(d, "provision"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "provision", "function.json"), []byte(fn), 0o644); err != nil {
			t.Fatal(err)
		}
		return d
	}
	goodHost := `{"version":"2.0","customHandler":{"description":{"defaultExecutablePath":"handler"}},"extensionBundle":{"id":"Microsoft.Azure.Functions.ExtensionBundle","version":"[4.*, 5.0.0)"}}`
	goodFn := `{"bindings":[{"type":"eventGridTrigger","direction":"in","name":"event"}]}`
	for _, c := range []struct{ name, host, fn, want string }{
		{"no custom handler", `{"version":"2.0","extensionBundle":{"id":"Microsoft.Azure.Functions.ExtensionBundle","version":"[4.*, 5.0.0)"}}`, goodFn, "customHandler.description"},
		{"version 1", strings.Replace(goodHost, `"2.0"`, `"1.0"`, 1), goodFn, "version"},
		{"executable in a folder", strings.Replace(goodHost, `"handler"`, `"bin/handler"`, 1), goodFn, "defaultExecutablePath"},
		{"no bundle", `{"version":"2.0","customHandler":{"description":{"defaultExecutablePath":"handler"}}}`, goodFn, "extensionBundle"},
		{"http trigger", goodHost, `{"bindings":[{"type":"httpTrigger","direction":"in","name":"req"}]}`, "bindings[0]"},
		{"binding name", goodHost, strings.Replace(goodFn, `"event"`, `"ev"`, 1), `"ev"`},
		{"two bindings", goodHost, `{"bindings":[{"type":"eventGridTrigger","direction":"in","name":"event"},{"type":"blob","direction":"out","name":"o"}]}`, "bindings: 2"},
	} {
		err := Package(filepath.Join(t.TempDir(), "x.zip"), app(c.host, c.fn), "provision", handler)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error naming %s", c.name, err, c.want)
		}
	}
	if err := Package(filepath.Join(t.TempDir(), "x.zip"), appDir, "provision", "main.go"); err == nil || !strings.Contains(err.Error(), "ELF") {
		t.Errorf("a source file as the handler: %v", err)
	}
	if err := Package(filepath.Join(t.TempDir(), "x.zip"), appDir, "scale", handler); err == nil {
		t.Error("a function without an app folder was packaged")
	}
}

func read(t *testing.T, f *zip.File) []byte {
	t.Helper()
	rc, err := f.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func readJSON(t *testing.T, f *zip.File, v any) {
	t.Helper()
	if f == nil {
		t.Fatal("entry missing")
	}
	if err := json.Unmarshal(read(t, f), v); err != nil {
		t.Fatalf("%s: %v", f.Name, err)
	}
}
