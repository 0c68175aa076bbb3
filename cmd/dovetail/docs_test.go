package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// Every `dovetail <command> ... --flag` the README and docs/ show names a flag that command has,
// so a renamed or removed flag cannot leave the documentation behind. Only command lines are
// read (a fenced line or an inline code span starting with the command), up to a shell comment.
func TestDocumentedFlagsExist(t *testing.T) {
	commands := map[string]*cobra.Command{}
	for _, c := range []*cobra.Command{newPlanCommand(), newExplainCommand(), newDevCommand(), newVersionCommand(), newAuditCommand(), newCostCommand(), newNATSAuthorizationCommand()} {
		commands[c.Name()] = c
	}
	pages, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, "../../README.md")
	// A fenced command line ends at its line; an inline code span may wrap.
	line := regexp.MustCompile("(?:go run \\./cmd/dovetail|bin/dovetail) ([a-z-]+)([^`\n]*)|`dovetail ([a-z-]+)([^`]*)")
	flag := regexp.MustCompile(`(?:^|[\s\[])--([a-z0-9][a-z0-9-]*)`)
	checked := 0
	for _, page := range pages {
		src, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range line.FindAllStringSubmatch(string(src), -1) {
			name, rest := m[1]+m[3], m[2]+m[4]
			cmd, ok := commands[name]
			if !ok {
				t.Errorf("%s: `dovetail %s` is not a command (have %v)", page, name, keys(commands))
				continue
			}
			var args []string
			for _, l := range strings.Split(rest, "\n") {
				args = append(args, strings.SplitN(l, " #", 2)[0])
			}
			for _, f := range flag.FindAllStringSubmatch(strings.Join(args, " "), -1) {
				checked++
				if cmd.Flags().Lookup(f[1]) == nil && cmd.InheritedFlags().Lookup(f[1]) == nil && cmd.PersistentFlags().Lookup(f[1]) == nil {
					t.Errorf("%s: `dovetail %s --%s`: the command has no such flag", page, name, f[1])
				}
			}
		}
	}
	if checked < 20 {
		t.Errorf("checked %d documented flags, want the docs' (the pattern no longer finds them)", checked)
	}
}

func keys(m map[string]*cobra.Command) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
