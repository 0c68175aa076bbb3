package main

import (
	"io"
	"strings"
	"testing"
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
