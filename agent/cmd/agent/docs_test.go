package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// Every flag of the agent is in docs/cli.md's table ("The agent's flags"), named as `--flag`.
func TestEveryFlagIsDocumented(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "cli.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "## The agent's flags")
	if !ok {
		t.Fatal(`docs/cli.md has no "## The agent's flags" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	newCommand().Flags().VisitAll(func(f *pflag.Flag) {
		if f.Name != "help" && !strings.Contains(section, "`--"+f.Name+"`") {
			t.Errorf("--%s is not in docs/cli.md's table of the agent's flags", f.Name)
		}
	})
}
