// Command controlplane runs one of the Kubernetes v1.34.2 control-plane components, chosen by its
// first argument, so the three share one build (most of their code is common):
//
//	controlplane kube-apiserver [flags]
//	controlplane kube-controller-manager [flags]
//	controlplane kube-scheduler [flags]
//
// Each subcommand is exactly the upstream command (same flags, same defaults): the blank imports
// are the ones the upstream main packages carry (time zones for CronJob, JSON logs, client-go and
// version metrics).
package main

import (
	"fmt"
	"os"
	_ "time/tzdata"

	"github.com/spf13/cobra"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
)

var components = map[string]func() *cobra.Command{
	"kube-apiserver":          apiserver.NewAPIServerCommand,
	"kube-controller-manager": func() *cobra.Command { return controllermanager.NewControllerManagerCommand() },
	"kube-scheduler":          func() *cobra.Command { return scheduler.NewSchedulerCommand() },
}

func main() {
	if len(os.Args) < 2 || components[os.Args[1]] == nil {
		fmt.Fprintln(os.Stderr, "usage: controlplane kube-apiserver|kube-controller-manager|kube-scheduler [flags]")
		os.Exit(2)
	}
	cmd := components[os.Args[1]]()
	// cobra parses os.Args[1:]; drop the component name so the upstream command sees only its flags.
	os.Args = append([]string{os.Args[1]}, os.Args[2:]...)
	os.Exit(cli.Run(cmd))
}
