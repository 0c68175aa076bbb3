// Command controlplane runs one of the Kubernetes v1.34.2 control-plane components, chosen by its
// first argument, so the three share one build (most of their code is common):
//
//	controlplane kube-apiserver [flags]
//	controlplane kube-controller-manager [flags]
//	controlplane kube-scheduler [flags]
//	controlplane etcd [flags]
//
// Each subcommand is exactly the upstream command (same flags, same defaults): the blank imports
// are the ones the upstream main packages carry (time zones for CronJob, JSON logs, client-go and
// version metrics). etcd is v3.6.4, the version k8s.io/kubernetes v1.34.2 requires (go.mod): unlike
// Debian's etcd 3.4.23 it answers watch progress requests, which kube-apiserver needs to serve the
// streaming lists client-go >= v0.35 asks for by default.
package main

import (
	"fmt"
	"os"
	_ "time/tzdata"

	"github.com/spf13/cobra"
	"go.etcd.io/etcd/server/v3/etcdmain"
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
	if len(os.Args) >= 2 && os.Args[1] == "etcd" {
		etcdmain.Main(os.Args[1:]) // etcd parses its flags from args[1:]
		return
	}
	if len(os.Args) < 2 || components[os.Args[1]] == nil {
		fmt.Fprintln(os.Stderr, "usage: controlplane kube-apiserver|kube-controller-manager|kube-scheduler|etcd [flags]")
		os.Exit(2)
	}
	cmd := components[os.Args[1]]()
	// cobra parses os.Args[1:]; drop the component name so the upstream command sees only its flags.
	os.Args = append([]string{os.Args[1]}, os.Args[2:]...)
	os.Exit(cli.Run(cmd))
}
