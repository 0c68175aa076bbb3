package main

import (
	"testing"

	"github.com/dovetail-dev/dovetail/localdev"
)

// dev --keep serves the agent's and the functions' HTTP endpoints on loopback unless the flags
// say where; without --keep nothing is served unless asked.
func TestDevKeepServesHTTPOnLoopback(t *testing.T) {
	cases := []struct {
		args             []string
		agent, functions string
	}{
		{nil, "", ""},
		{[]string{"--keep"}, "127.0.0.1:0", "127.0.0.1:0"},
		{[]string{"--keep", "--agent-http-addr", "127.0.0.1:8080"}, "127.0.0.1:8080", "127.0.0.1:0"},
		{[]string{"--keep", "--functions-http-addr", ""}, "127.0.0.1:0", ""},
		{[]string{"--functions-http-addr", "127.0.0.1:8081"}, "", "127.0.0.1:8081"},
	}
	for _, c := range cases {
		cmd := newDevCommand()
		if err := cmd.ParseFlags(c.args); err != nil {
			t.Fatal(err)
		}
		var o localdev.Options
		o.Keep, _ = cmd.Flags().GetBool("keep")
		o.AgentHTTPAddr, _ = cmd.Flags().GetString("agent-http-addr")
		o.FunctionsHTTPAddr, _ = cmd.Flags().GetString("functions-http-addr")
		keepServesHTTP(cmd.Flags(), &o)
		if o.AgentHTTPAddr != c.agent || o.FunctionsHTTPAddr != c.functions {
			t.Errorf("dev %v: agent %q functions %q, want %q and %q", c.args, o.AgentHTTPAddr, o.FunctionsHTTPAddr, c.agent, c.functions)
		}
	}
}
