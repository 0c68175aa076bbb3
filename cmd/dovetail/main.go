// Command dovetail is the user's CLI: `dovetail dev` runs the whole system on one machine
// (embedded NATS JetStream, fake cloud, in-memory cluster), `dovetail plan` prints the decision
// for a set of manifests without launching anything, `dovetail version` says which build it is.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// exitInvalidInput is the exit status for manifests that cannot be read or are invalid.
const exitInvalidInput = 2

// usageError marks errors caused by the user's input (exit status 2).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run executes the CLI and returns the process exit status.
func run(args []string, stdout, stderr io.Writer) int { return runWith(args, os.Stdin, stdout, stderr) }

// runWith is run with stdin as what `-f -` reads.
func runWith(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := &cobra.Command{
		Use:           "dovetail",
		Short:         "Dovetail provisions Kubernetes nodes from pending pods, as event-driven functions",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	info, ok := debug.ReadBuildInfo()
	root.Version = versionString(info, ok)
	root.SetVersionTemplate("{{.Version}}\n")
	root.AddCommand(newPlanCommand(), newExplainCommand(), newDevCommand(), newVersionCommand(), newAuditCommand(), newCostCommand(), newNATSAuthorizationCommand())
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	if err := root.Execute(); err != nil {
		fmt.Fprintln(stderr, "error:", err)
		var ue usageError
		if errors.As(err, &ue) {
			return exitInvalidInput
		}
		return 1
	}
	return 0
}
