package localdev

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/kube"
)

// `dovetail dev --cloud aws -f localdev/examples/untagged-subnet.yaml`: an EC2NodeClass
// selecting a subnet without the discovery tag is not Ready, with the reason naming the subnet
// and the tag, and nothing is launched while its pods wait.
func TestUntaggedSubnetNodeClassLaunchesNothing(t *testing.T) {
	var buf bytes.Buffer
	out := &syncWriter{w: &buf}
	text := func() string { out.mu.Lock(); defer out.mu.Unlock(); return buf.String() }
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	env, err := Start(ctx, Options{CloudProvider: CloudAWS, Manifests: []string{"examples/untagged-subnet.yaml"}, Out: out, BootDelay: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer env.Stop()

	var cond map[string]any
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		u, err := env.Cluster.Dynamic.Resource(kube.EC2NodeClassGVR).Get(ctx, "public", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			if m := c.(map[string]any); m["type"] == apisv1.ConditionSubnetsReady {
				cond = m
			}
		}
		// Wait until the provision function has decided on the pending pods too.
		return cond != nil && strings.Contains(text(), "cannot be placed"), nil
	})
	if err != nil {
		t.Fatalf("no SubnetsReady condition and decision: %v\n%s", err, text())
	}
	if cond["status"] != "False" || cond["reason"] != apisv1.ReasonSubnetsNotAllowed ||
		!strings.Contains(cond["message"].(string), "(dovetail-fake-public-us-east-1a) lacks the discovery tag karpenter.sh/discovery=dovetail-dev") {
		t.Errorf("SubnetsReady %v", cond)
	}
	if !strings.Contains(text(), "EC2NodeClass public is not ready") {
		t.Errorf("the progress does not show the class refused:\n%s", text())
	}
	if n := len(env.EC2API.RequestsOf("CreateFleet")); n != 0 {
		t.Errorf("%d CreateFleet calls, want none", n)
	}
	if n := len(env.Cloud.Records()); n != 0 {
		t.Errorf("%d instances launched, want none", n)
	}
}
