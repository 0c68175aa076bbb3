package charts

import (
	"bytes"
	"encoding/json"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"

	"github.com/dovetail-dev/dovetail/shared/queue/nats/natsauth"
)

// The least an operator must give for each transport: clusterName and the transport's required
// values (values.yaml's "Required"), everything else the chart's defaults.
var (
	natsOwnServerMinimal = map[string]any{"clusterName": "dev",
		"nats": map[string]any{"url": "tls://nats.queue.svc:4222", "auth": map[string]any{"agent": map[string]any{"secretName": "nats-agent"}}}}
	natsBundledMinimal = map[string]any{"clusterName": "dev",
		"nats": map[string]any{"server": map[string]any{"enabled": true}, "tls": map[string]any{"secretName": "nats-tls"},
			"auth": map[string]any{"agent": map[string]any{"secretName": "nats-agent", "publicKey": rolePublicKeys[natsauth.RoleAgent]}}}}
	sqsMinimal = map[string]any{"clusterName": "prod", "transport": "sqs",
		"sqs": map[string]any{"commandQueueURL": "https://sqs.us-east-1.amazonaws.com/111122223333/prod-commands.fifo",
			"eventQueueURLs": map[string]any{
				"provision":    "https://sqs.us-east-1.amazonaws.com/111122223333/prod-events.fifo",
				"consolidate":  "https://sqs.us-east-1.amazonaws.com/111122223333/prod-consolidate-events.fifo",
				"drift":        "https://sqs.us-east-1.amazonaws.com/111122223333/prod-drift-events.fifo",
				"interruption": "https://sqs.us-east-1.amazonaws.com/111122223333/prod-interruption-events.fifo",
				"lifecycle":    "https://sqs.us-east-1.amazonaws.com/111122223333/prod-lifecycle-events.fifo"}}}
	eventGridMinimal = map[string]any{"clusterName": "aks", "transport": "eventgrid", "nodeClassKind": "AKSNodeClass",
		"eventgrid": map[string]any{"topicEndpoint": "https://dt-events.westeurope-1.eventgrid.azure.net/api/events",
			"namespaceEndpoint": "https://dt-ns.westeurope-1.eventgrid.azure.net"}}
)

// helm install with only clusterName and a transport's required values works: lint passes, every
// manifest decodes strictly, the agent gets each required value as its flag and no flag is
// rendered empty; one value fewer fails naming that value (TestBadValuesNameTheField covers each).
func TestMinimalValuesInstall(t *testing.T) {
	cases := []struct {
		name string
		vals map[string]any
		want []string // args the required values must become
	}{
		{"nats, own server", natsOwnServerMinimal, []string{"--transport=nats", "--nats-url=tls://nats.queue.svc:4222",
			"--nats-nkey-seed=/etc/dovetail/nats/credentials/nkey"}},
		{"nats, bundled server", natsBundledMinimal, []string{"--transport=nats", "--nats-url=nats://dovetail-nats.dovetail-system.svc:4222",
			"--nats-nkey-seed=/etc/dovetail/nats/credentials/nkey", "--nats-tls-ca=/etc/dovetail/nats/tls/ca.crt"}},
		{"sqs", sqsMinimal, []string{"--transport=sqs",
			"--event-queue-url=https://sqs.us-east-1.amazonaws.com/111122223333/prod-events.fifo",
			"--event-queue-url=https://sqs.us-east-1.amazonaws.com/111122223333/prod-consolidate-events.fifo",
			"--event-queue-url=https://sqs.us-east-1.amazonaws.com/111122223333/prod-drift-events.fifo",
			"--event-queue-url=https://sqs.us-east-1.amazonaws.com/111122223333/prod-interruption-events.fifo",
			"--event-queue-url=https://sqs.us-east-1.amazonaws.com/111122223333/prod-lifecycle-events.fifo",
			"--command-queue-url=https://sqs.us-east-1.amazonaws.com/111122223333/prod-commands.fifo"}},
		{"eventgrid", eventGridMinimal, []string{"--transport=eventgrid", "--node-class-kind=AKSNodeClass",
			"--eventgrid-topic-endpoint=https://dt-events.westeurope-1.eventgrid.azure.net/api/events",
			"--eventgrid-namespace-endpoint=https://dt-ns.westeurope-1.eventgrid.azure.net"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := lint.AllWithKubeVersion(Dir, c.vals, testNamespace, &KubeVersion)
			if l.HighestSeverity > support.InfoSev {
				t.Errorf("helm lint: %v", l.Messages)
			}
			r := render(t, c.vals)
			args := agentContainer(t, r).Args
			for _, w := range c.want {
				if !slices.Contains(args, w) {
					t.Errorf("agent args %q lack %s", args, w)
				}
			}
			// --event-queue-url repeated, in the chart's order: provision's first.
			var queues []string
			for _, a := range args {
				if strings.HasSuffix(a, "=") {
					t.Errorf("agent arg %s is empty", a)
				}
				if strings.HasPrefix(a, "--event-queue-url=") {
					queues = append(queues, a)
				}
			}
			if c.name == "sqs" && (len(queues) != 5 || !strings.HasSuffix(queues[0], "prod-events.fifo")) {
				t.Errorf("event queues %q, want the five functions', provision's first", queues)
			}
		})
	}
}

// The chart's function names (sqs.eventQueueURLs' schema keys and values.yaml's defaults) are
// infra/aws/terraform's event_queue_urls keys, and docs/install.md's EKS install line passes that output
// as it is, so `--set-json "sqs.eventQueueURLs=$(terraform output -json event_queue_urls)"` fills
// every function's queue and nothing else.
func TestSQSQueueKeysAreTerraformOutput(t *testing.T) {
	src, err := os.ReadFile("../infra/aws/terraform/outputs.tf")
	if err != nil {
		t.Fatal(err)
	}
	f, diags := hclsyntax.ParseConfig(src, "outputs.tf", hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	var tfKeys []string
	for _, b := range f.Body.(*hclsyntax.Body).Blocks {
		if b.Type != "output" || b.Labels[0] != "event_queue_urls" {
			continue
		}
		obj, ok := b.Body.Attributes["value"].Expr.(*hclsyntax.ObjectConsExpr)
		if !ok {
			t.Fatalf("output event_queue_urls: %T, want an object keyed by function name", b.Body.Attributes["value"].Expr)
		}
		for _, it := range obj.Items {
			k, diags := it.KeyExpr.Value(nil)
			if diags.HasErrors() {
				t.Fatal(diags)
			}
			tfKeys = append(tfKeys, k.AsString())
		}
	}
	sort.Strings(tfKeys)

	c, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Properties struct {
			SQS struct {
				Properties struct {
					EventQueueURLs struct {
						AdditionalProperties *bool          `json:"additionalProperties"`
						Properties           map[string]any `json:"properties"`
					} `json:"eventQueueURLs"`
				} `json:"properties"`
			} `json:"sqs"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(c.Schema, &schema); err != nil {
		t.Fatal(err)
	}
	s := schema.Properties.SQS.Properties.EventQueueURLs
	var schemaKeys, defaultKeys []string
	for k := range s.Properties {
		schemaKeys = append(schemaKeys, k)
	}
	for k := range c.Values["sqs"].(map[string]any)["eventQueueURLs"].(map[string]any) {
		defaultKeys = append(defaultKeys, k)
	}
	sort.Strings(schemaKeys)
	sort.Strings(defaultKeys)
	want := []string{"consolidate", "drift", "interruption", "lifecycle", "provision"}
	for name, got := range map[string][]string{"terraform output event_queue_urls": tfKeys, "schema": schemaKeys, "values.yaml": defaultKeys} {
		if !slices.Equal(got, want) {
			t.Errorf("%s keys %v, want the functions %v", name, got, want)
		}
	}
	if s.AdditionalProperties == nil || *s.AdditionalProperties {
		t.Error("schema: sqs.eventQueueURLs takes keys other than the functions'")
	}
	readme, err := os.ReadFile("../docs/install.md")
	if err != nil {
		t.Fatal(err)
	}
	if line := `--set-json "sqs.eventQueueURLs=$(terraform output -json event_queue_urls)"`; !bytes.Contains(readme, []byte(line)) {
		t.Errorf("docs/install.md's Helm install line lacks %s", line)
	}
}
