package main

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"

	"github.com/dovetail-dev/dovetail/charts"
)

// The Helm chart's agent args parse with the agent's own flags (an unknown or misspelt flag
// fails) into the values the chart was given, for each transport.
func TestHelmChartArgsParse(t *testing.T) {
	const q = "https://sqs.eu-west-1.amazonaws.com/111122223333/"
	cases := []struct {
		name   string
		values map[string]any
		want   map[string]string
	}{
		{"nats", map[string]any{"clusterName": "c1", "nats": map[string]any{"url": "nats://nats.queue.svc:4222",
			"auth": map[string]any{"agent": map[string]any{"secretName": "nats-agent"}}, "tls": map[string]any{"caSecretName": "nats-ca"}}},
			map[string]string{"transport": "nats", "nats-url": "nats://nats.queue.svc:4222", "ensure-stream": "true",
				"nats-nkey-seed": "/etc/dovetail/nats/credentials/nkey", "nats-tls-ca": "/etc/dovetail/nats/tls/ca.crt", "nats-insecure-no-auth": "false"}},
		{"nats creds", map[string]any{"clusterName": "c1", "nats": map[string]any{"url": "tls://nats.queue.svc:4222",
			"auth": map[string]any{"type": "creds", "agent": map[string]any{"secretName": "nats-agent"}}}},
			map[string]string{"transport": "nats", "nats-url": "tls://nats.queue.svc:4222", "nats-creds": "/etc/dovetail/nats/credentials/creds", "nats-tls-ca": ""}},
		{"sqs", map[string]any{"clusterName": "c1", "transport": "sqs", "sqs": map[string]any{
			"eventQueueURLs": map[string]any{"lifecycle": q + "l.fifo", "interruption": q + "i.fifo", "drift": q + "d.fifo",
				"consolidate": q + "c.fifo", "provision": q + "p.fifo"},
			"commandQueueURL": "https://sqs.eu-west-1.amazonaws.com/111122223333/c.fifo", "blobBucket": "claims", "blobPrefix": "p/"}},
			// provision's first: the agent routes events to the first URL and fans out to the rest.
			map[string]string{"transport": "sqs", "event-queue-url": "[" + q + "p.fifo," + q + "c.fifo," + q + "d.fifo," + q + "i.fifo," + q + "l.fifo]",
				"command-queue-url": "https://sqs.eu-west-1.amazonaws.com/111122223333/c.fifo", "blob-bucket": "claims", "blob-prefix": "p/"}},
		{"eventgrid", map[string]any{"clusterName": "c1", "transport": "eventgrid", "nodeClassKind": "AKSNodeClass", "eventgrid": map[string]any{
			"topicEndpoint": "https://t.westeurope-1.eventgrid.azure.net/api/events", "namespaceEndpoint": "https://n.westeurope-1.eventgrid.azure.net",
			"commandsTopic": "cmds", "commandsSubscription": "agent-1"}},
			map[string]string{"transport": "eventgrid", "node-class-kind": "AKSNodeClass", "eventgrid-topic-endpoint": "https://t.westeurope-1.eventgrid.azure.net/api/events",
				"eventgrid-namespace-endpoint": "https://n.westeurope-1.eventgrid.azure.net", "commands-topic": "cmds", "commands-subscription": "agent-1"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ms, err := charts.Render("dt", "ops", c.values)
			if err != nil {
				t.Fatal(err)
			}
			var args []string
			for _, m := range ms {
				if m.Kind == "Deployment" && m.Name == "dt-dovetail-agent" {
					var d appsv1.Deployment
					if err := yaml.UnmarshalStrict([]byte(m.YAML), &d); err != nil {
						t.Fatal(err)
					}
					args = d.Spec.Template.Spec.Containers[0].Args
				}
			}
			cmd := newCommand()
			if err := cmd.ParseFlags(args); err != nil {
				t.Fatalf("%v: %q", err, args)
			}
			c.want["cluster"], c.want["namespace"], c.want["http-addr"] = "c1", "ops", ":8080"
			for name, want := range c.want {
				if got := cmd.Flags().Lookup(name).Value.String(); got != want {
					t.Errorf("--%s = %q, want %q", name, got, want)
				}
			}
		})
	}
}
