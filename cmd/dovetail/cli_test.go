package main

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

func TestVersion(t *testing.T) {
	code, out, stderr := runCLI(t, "version")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	// A test binary records no module version and, under -buildvcs=false, no commit.
	if !strings.HasPrefix(out, "dovetail ") || !strings.Contains(out, runtime.GOOS+"/"+runtime.GOARCH) || !strings.Contains(out, "go1.") {
		t.Errorf("version printed %q", out)
	}
	if code, flagOut, _ := runCLI(t, "--version"); code != 0 || flagOut != out {
		t.Errorf("--version printed %q (exit %d), want the version command's %q", flagOut, code, out)
	}
}

func TestVersionString(t *testing.T) {
	info := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.4.0"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.modified", Value: "true"}}}
	want := "dovetail v0.4.0 (commit 0123456789ab, modified, go1.26.8, " + runtime.GOOS + "/" + runtime.GOARCH + ")"
	if got := versionString(info, true); got != want {
		t.Errorf("build info version: %q, want %q", got, want)
	}
	// -X main.version wins over the module version; no build info still prints something.
	defer func(v string) { version = v }(version)
	version = "v0.5.0-rc.1"
	if got := versionString(info, true); !strings.HasPrefix(got, "dovetail v0.5.0-rc.1 (commit 0123456789ab") {
		t.Errorf("ldflags version: %q", got)
	}
	version = ""
	if got := versionString(nil, false); !strings.HasPrefix(got, "dovetail (devel) ("+runtime.Version()) {
		t.Errorf("no build info: %q", got)
	}
}

// pflag reads a back-quoted word in a flag's usage as the name of its value ("--control-plane
// make controlplane" was printed); every flag's help must name its value type.
func TestHelpNamesEveryFlagsType(t *testing.T) {
	code, out, _ := runCLI(t, "dev", "--help")
	if code != 0 || !strings.Contains(out, "--control-plane string") {
		t.Errorf("dev --help (exit %d) does not show --control-plane string:\n%s", code, out)
	}
	root := &cobra.Command{Use: "dovetail"}
	root.AddCommand(newPlanCommand(), newDevCommand(), newVersionCommand())
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			name, _ := pflag.UnquoteUsage(f)
			if want := f.Value.Type(); name != want && !(want == "bool" && name == "") && !strings.HasSuffix(want, "Array") && !strings.HasSuffix(want, "Slice") {
				t.Errorf("%s --%s: help shows its value as %q, want %q (a back-quoted word in its usage?)", c.CommandPath(), f.Name, name, want)
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}
