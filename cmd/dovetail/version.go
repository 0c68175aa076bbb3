package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is the release, set at link time (make build: -ldflags "-X main.version=$(git describe)").
// Empty: the module version Go recorded (a tag with `go install ...@v1.2.3`, "(devel)" in a
// checkout).
var version string

// versionString is "dovetail <version> (commit <rev>[, modified], <go version>, <os>/<arch>)";
// the commit is left out when the build recorded none (-buildvcs=false, or no VCS).
func versionString(info *debug.BuildInfo, ok bool) string {
	v, rev, dirty, goVersion := version, "", false, runtime.Version()
	if ok {
		if v == "" {
			v = info.Main.Version
		}
		goVersion = info.GoVersion
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	if v == "" {
		v = "(devel)"
	}
	detail := ""
	if rev != "" {
		detail = "commit " + rev[:min(12, len(rev))]
		if dirty {
			detail += ", modified"
		}
		detail += ", "
	}
	return fmt.Sprintf("dovetail %s (%s%s, %s/%s)", v, detail, goVersion, runtime.GOOS, runtime.GOARCH)
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print Dovetail's version, commit and Go version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info, ok := debug.ReadBuildInfo()
			_, err := fmt.Fprintln(cmd.OutOrStdout(), versionString(info, ok))
			return err
		},
	}
}
