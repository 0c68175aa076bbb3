// Command azurefuncpkg writes one function's Azure Functions custom-handler app as the zip
// WEBSITE_RUN_FROM_PACKAGE mounts (infra/azure: var.package_urls): host.json at the root, one
// folder per Event Grid-triggered route of the function holding its function.json, and the
// handler binary the host starts. The layout and fields are the documented ones ("Azure Functions
// custom handlers": host.json at the app root with version "2.0" and
// customHandler.description.defaultExecutablePath; a function.json per function in a folder named
// after it; triggers other than HTTP through the extension bundle). A function's routes are
// shared/runtime's: /<function> and, where app/ has it, /<function>-events. Each file is checked
// before it is written; entries have fixed times and a fixed order, so the same inputs give the
// same zip. No zip binary is needed.
//
// Usage: go run ./hack/azurefuncpkg -app infra/azure/app -function provision -handler dist/azure/provision/handler -o dist/provision-azure.zip
package main

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// modTime is fixed for reproducible zips (the zip format's DOS time starts in 1980).
var modTime = time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)

// Names the packaged app must use: the trigger binding shared/runtime reads the event from
// (runtime.DefaultTriggerBinding) and the suffix of a function's second route
// (runtime.EventsRouteSuffix). Repeated here so this build tool links none of the runtime.
const (
	triggerBinding = "event"
	eventsSuffix   = "-events"
	bundleID       = "Microsoft.Azure.Functions.ExtensionBundle"
)

func main() {
	app := flag.String("app", "infra/azure/app", "folder holding host.json and one folder per route")
	function := flag.String("function", "", "function name (provision, consolidate, drift, interruption, lifecycle)")
	handler := flag.String("handler", "", "the function's linux/amd64 binary")
	out := flag.String("o", "", "zip file to write")
	flag.Parse()
	if *function == "" || *handler == "" || *out == "" || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: azurefuncpkg -app DIR -function NAME -handler BINARY -o OUT.zip")
		os.Exit(2)
	}
	if err := Package(*out, *app, *function, *handler); err != nil {
		fmt.Fprintln(os.Stderr, "azurefuncpkg:", err)
		os.Exit(1)
	}
}

// Package writes the app of function to out. Errors name the file and field that is wrong.
func Package(out, app, function, handler string) error {
	host, err := os.ReadFile(filepath.Join(app, "host.json"))
	if err != nil {
		return err
	}
	exe, err := CheckHost(host)
	if err != nil {
		return fmt.Errorf("%s: %w", filepath.Join(app, "host.json"), err)
	}
	entries := []entry{{name: "host.json", data: host, mode: 0o644}}
	for _, route := range []string{function, function + eventsSuffix} {
		path := filepath.Join(app, route, "function.json")
		b, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) && route != function {
			continue // the function has no second route
		}
		if err != nil {
			return err
		}
		if err := CheckFunction(b); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		entries = append(entries, entry{name: route + "/function.json", data: b, mode: 0o644})
	}
	bin, err := os.ReadFile(handler)
	if err != nil {
		return err
	}
	if !bytes.HasPrefix(bin, []byte("\x7fELF")) {
		return fmt.Errorf("%s: not an ELF binary (Linux Function Apps run linux/amd64)", handler)
	}
	// The host starts the handler as-is: it must be executable.
	entries = append(entries, entry{name: exe, data: bin, mode: 0o755})
	return write(out, entries)
}

// CheckHost checks a host.json for a custom handler app and returns the executable it names:
// version "2.0", customHandler.description.defaultExecutablePath a plain file name at the app
// root, and the extension bundle (the Event Grid trigger is not built into the host).
func CheckHost(b []byte) (string, error) {
	var h struct {
		Version       string `json:"version"`
		CustomHandler *struct {
			Description *struct {
				DefaultExecutablePath string   `json:"defaultExecutablePath"`
				WorkingDirectory      string   `json:"workingDirectory"`
				Arguments             []string `json:"arguments"`
			} `json:"description"`
			EnableForwardingHTTPRequest bool `json:"enableForwardingHttpRequest"`
		} `json:"customHandler"`
		ExtensionBundle *struct {
			ID      string `json:"id"`
			Version string `json:"version"`
		} `json:"extensionBundle"`
	}
	if err := json.Unmarshal(b, &h); err != nil {
		return "", err
	}
	switch {
	case h.Version != "2.0":
		return "", fmt.Errorf("version: %q, want \"2.0\"", h.Version)
	case h.CustomHandler == nil || h.CustomHandler.Description == nil:
		return "", errors.New("customHandler.description: missing (not a custom handler app)")
	case h.CustomHandler.Description.DefaultExecutablePath == "" || filepath.Base(h.CustomHandler.Description.DefaultExecutablePath) != h.CustomHandler.Description.DefaultExecutablePath:
		return "", fmt.Errorf("customHandler.description.defaultExecutablePath: %q, want a file name at the app root", h.CustomHandler.Description.DefaultExecutablePath)
	case h.CustomHandler.EnableForwardingHTTPRequest:
		return "", errors.New("customHandler.enableForwardingHttpRequest: true forwards only HTTP triggers; the functions take Event Grid invocations")
	case h.ExtensionBundle == nil || h.ExtensionBundle.ID != bundleID || h.ExtensionBundle.Version == "":
		return "", fmt.Errorf("extensionBundle: want id %s and a version range (the Event Grid trigger comes from it)", bundleID)
	}
	return h.CustomHandler.Description.DefaultExecutablePath, nil
}

// CheckFunction checks a function.json: exactly one binding, an eventGridTrigger in the direction
// "in" named as the runtime reads it.
func CheckFunction(b []byte) error {
	var f struct {
		Bindings []struct {
			Type      string `json:"type"`
			Direction string `json:"direction"`
			Name      string `json:"name"`
		} `json:"bindings"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	if len(f.Bindings) != 1 {
		return fmt.Errorf("bindings: %d, want one eventGridTrigger", len(f.Bindings))
	}
	if bd := f.Bindings[0]; bd.Type != "eventGridTrigger" || bd.Direction != "in" || bd.Name != triggerBinding {
		return fmt.Errorf("bindings[0]: type %q, direction %q, name %q; want eventGridTrigger, in, %q", bd.Type, bd.Direction, bd.Name, triggerBinding)
	}
	return nil
}

type entry struct {
	name string
	data []byte
	mode fs.FileMode
}

func write(out string, entries []entry) error {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	zw := zip.NewWriter(f)
	for _, e := range entries {
		hdr := &zip.FileHeader{Name: e.name, Method: zip.Deflate, Modified: modTime}
		hdr.SetMode(e.mode)
		w, werr := zw.CreateHeader(hdr)
		if werr == nil {
			_, werr = w.Write(e.data)
		}
		if werr != nil {
			err = werr
			break
		}
	}
	if cerr := zw.Close(); err == nil {
		err = cerr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
