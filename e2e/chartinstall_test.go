//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/nats-io/nkeys"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/dovetail-dev/dovetail/charts"
	"github.com/dovetail-dev/dovetail/e2e/realcluster"
)

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// helmInstallCRDs installs the chart's crds/ as `helm install` does (helm.sh/helm/v3 v3.22.0,
// pkg/action/install.go, installCRDs): each CRD is created; one that already exists is skipped
// and left as it is (never updated); then the install waits for the ones it created to be
// Established (Helm waits 60 s). It returns the CRD names created and skipped, each sorted.
func helmInstallCRDs(ctx context.Context, cp *realcluster.ControlPlane) (created, skipped []string, err error) {
	crds, err := charts.CRDs()
	if err != nil {
		return nil, nil, err
	}
	dc, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		return nil, nil, err
	}
	for _, c := range crds {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(c.YAML, &u.Object); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", c.Name, err)
		}
		if _, err := dc.Resource(crdGVR).Create(ctx, u, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
			skipped = append(skipped, u.GetName())
			continue
		} else if err != nil {
			return nil, nil, fmt.Errorf("%s: creating CRD %s: %w", c.Name, u.GetName(), err)
		}
		created = append(created, u.GetName())
	}
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for _, name := range created {
		err := wait.PollUntilContextCancel(wctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			u, err := dc.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
			for _, c := range conds {
				if m, ok := c.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return nil, nil, fmt.Errorf("CRD %s not Established: %w", name, err)
		}
	}
	sort.Strings(created)
	sort.Strings(skipped)
	return created, skipped, nil
}

// crdVersions returns each CRD's resourceVersion by name (to show a second install left them
// untouched).
func crdVersions(ctx context.Context, t *testing.T, cp *realcluster.ControlPlane, names []string) map[string]string {
	t.Helper()
	dc, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, n := range names {
		u, err := dc.Resource(crdGVR).Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out[n] = u.GetResourceVersion()
	}
	return out
}

// dryRunInstall sends every rendered manifest to kube-apiserver as a server-side apply with
// dryRun=All: the API server decodes, defaults, validates and admits each object as it would
// on install (RBAC escalation checks included) and stores nothing, so a second release's
// cluster-scoped objects (the agent's ClusterRole and binding) do not replace the running one's.
// The namespace itself is created (an empty namespace changes nothing).
func dryRunInstall(ctx context.Context, cp *realcluster.ControlPlane, ns string, ms []charts.Manifest) error {
	dc, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		return err
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cp.Config)
	if err != nil {
		return err
	}
	kc, err := cp.Clientset()
	if err != nil {
		return err
	}
	if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc))
	for _, m := range ms {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(m.YAML), &u.Object); err != nil {
			return fmt.Errorf("%s: %w", m.Template, err)
		}
		gvk := u.GroupVersionKind()
		rm, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return fmt.Errorf("%s: %s %s: %w", m.Template, gvk.Kind, u.GetName(), err)
		}
		var ri dynamic.ResourceInterface = dc.Resource(rm.Resource)
		if rm.Scope.Name() == meta.RESTScopeNameNamespace {
			ri = dc.Resource(rm.Resource).Namespace(u.GetNamespace())
		}
		if _, err := ri.Apply(ctx, u.GetName(), u, metav1.ApplyOptions{FieldManager: "helm", Force: true,
			DryRun: []string{metav1.DryRunAll}}); err != nil {
			return fmt.Errorf("%s: %s %s: %w", m.Template, gvk.Kind, u.GetName(), err)
		}
	}
	return nil
}

// The least an operator must give for the transports the e2e suite cannot run an agent on (no
// SQS or Event Grid here): clusterName and the transport's required values, the rest the
// chart's defaults (charts' TestMinimalValuesInstall checks the same shapes render).
func dryRunTransports(t *testing.T) []struct {
	name   string
	values map[string]any
} {
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	agentKey, err := kp.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	return []struct {
		name   string
		values map[string]any
	}{
		{"sqs", map[string]any{"clusterName": "e2e", "transport": "sqs",
			"sqs": map[string]any{"commandQueueURL": "https://sqs.us-east-1.amazonaws.com/111122223333/e2e-commands.fifo",
				"eventQueueURLs": map[string]any{
					"provision":    "https://sqs.us-east-1.amazonaws.com/111122223333/e2e-events.fifo",
					"consolidate":  "https://sqs.us-east-1.amazonaws.com/111122223333/e2e-consolidate-events.fifo",
					"drift":        "https://sqs.us-east-1.amazonaws.com/111122223333/e2e-drift-events.fifo",
					"interruption": "https://sqs.us-east-1.amazonaws.com/111122223333/e2e-interruption-events.fifo",
					"lifecycle":    "https://sqs.us-east-1.amazonaws.com/111122223333/e2e-lifecycle-events.fifo"}}}},
		{"eventgrid", map[string]any{"clusterName": "e2e", "transport": "eventgrid", "nodeClassKind": "AKSNodeClass",
			"eventgrid": map[string]any{"topicEndpoint": "https://e2e-events.westeurope-1.eventgrid.azure.net/api/events",
				"namespaceEndpoint": "https://e2e-ns.westeurope-1.eventgrid.azure.net"}}},
		{"nats, bundled server", map[string]any{"clusterName": "e2e",
			"nats": map[string]any{"server": map[string]any{"enabled": true}, "tls": map[string]any{"secretName": "e2e-nats-tls"},
				"auth": map[string]any{"agent": map[string]any{"secretName": "e2e-nats-agent",
					"publicKey": agentKey}}}}},
	}
}
