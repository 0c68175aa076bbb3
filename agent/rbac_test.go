package agent

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/clock"

	"github.com/dovetail-dev/dovetail/events"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/kevents"
	"github.com/dovetail-dev/dovetail/shared/kube"
	"github.com/dovetail-dev/dovetail/shared/queue"
	"github.com/dovetail-dev/dovetail/shared/telemetry"
)

// boundRules are the rules of rbac.yaml that reach the agent's service account, each with the
// namespace it is limited to ("" for a ClusterRole).
type boundRule struct {
	namespace string
	rule      rbacv1.PolicyRule
}

func loadRBAC(t *testing.T) []boundRule {
	t.Helper()
	raw, err := os.ReadFile("rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	var clusterRoles []rbacv1.ClusterRole
	var roles []rbacv1.Role
	bound := map[string]bool{} // "ClusterRole/name" or "Role/ns/name" bound to the agent
	for {
		var head metav1.TypeMeta
		var doc runtime.RawExtension
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("rbac.yaml: %v", err)
		}
		if err := utilyaml.Unmarshal(doc.Raw, &head); err != nil {
			t.Fatal(err)
		}
		switch head.Kind {
		case "ClusterRole":
			var r rbacv1.ClusterRole
			mustUnmarshal(t, doc.Raw, &r)
			clusterRoles = append(clusterRoles, r)
		case "Role":
			var r rbacv1.Role
			mustUnmarshal(t, doc.Raw, &r)
			roles = append(roles, r)
		case "ClusterRoleBinding":
			var b rbacv1.ClusterRoleBinding
			mustUnmarshal(t, doc.Raw, &b)
			if bindsAgent(b.Subjects) {
				bound["ClusterRole/"+b.RoleRef.Name] = true
			}
		case "RoleBinding":
			var b rbacv1.RoleBinding
			mustUnmarshal(t, doc.Raw, &b)
			if bindsAgent(b.Subjects) {
				bound[b.RoleRef.Kind+"/"+b.Namespace+"/"+b.RoleRef.Name] = true
			}
		case "ServiceAccount":
		default:
			t.Fatalf("rbac.yaml: unexpected kind %q", head.Kind)
		}
	}
	var out []boundRule
	for _, r := range clusterRoles {
		if bound["ClusterRole/"+r.Name] {
			for _, rule := range r.Rules {
				out = append(out, boundRule{"", rule})
			}
		}
	}
	for _, r := range roles {
		if bound["Role/"+r.Namespace+"/"+r.Name] {
			for _, rule := range r.Rules {
				out = append(out, boundRule{r.Namespace, rule})
			}
		}
	}
	return out
}

func mustUnmarshal(t *testing.T, raw []byte, into any) {
	t.Helper()
	if err := utilyaml.Unmarshal(raw, into); err != nil {
		t.Fatal(err)
	}
}

func bindsAgent(subjects []rbacv1.Subject) bool {
	for _, s := range subjects {
		if s.Kind == "ServiceAccount" && s.Name == "dovetail-agent" && s.Namespace == "dovetail-system" {
			return true
		}
	}
	return false
}

// allowed applies RBAC's matching (Kubernetes docs, "Using RBAC Authorization": a rule matches
// when the API group, the resource ("resource/subresource"), the verb and, if given, the
// resource name all match; Role rules only in their namespace). A list or watch with a
// metadata.name field selector counts as a request for that name.
func allowed(rules []boundRule, verb, group, resource, namespace, name string) bool {
	has := func(list []string, v string) bool {
		for _, x := range list {
			if x == v || x == "*" {
				return true
			}
		}
		return false
	}
	for _, br := range rules {
		r := br.rule
		if br.namespace != "" && br.namespace != namespace {
			continue
		}
		if !has(r.Verbs, verb) || !has(r.APIGroups, group) || !has(r.Resources, resource) {
			continue
		}
		if len(r.ResourceNames) > 0 && (name == "" || !has(r.ResourceNames, name)) {
			continue
		}
		return true
	}
	return false
}

func actionName(a k8stesting.Action) string {
	switch x := a.(type) {
	case interface{ GetName() string }: // get, delete and patch actions
		return x.GetName()
	case k8stesting.ListAction:
		if v, ok := x.GetListRestrictions().Fields.RequiresExactMatch("metadata.name"); ok {
			return v
		}
	case k8stesting.WatchAction:
		if v, ok := x.GetWatchRestrictions().Fields.RequiresExactMatch("metadata.name"); ok {
			return v
		}
	}
	return ""
}

// TestRBACCoversEveryCall runs every command kind through the agent and checks each API call the
// agent made (recorded by the fake clients) against rbac.yaml.
func TestRBACCoversEveryCall(t *testing.T) {
	rules := loadRBAC(t)
	const pid3 = "aws:///us-east-1a/i-0aaaaaaaaaaaaaaa3"
	n3 := testNode("n3") // registering: the lifecycle commands' node
	n3.Spec.ProviderID = pid3
	n3.Spec.Taints = []corev1.Taint{{Key: apisv1.TaintKeyUnregistered, Effect: corev1.TaintEffectNoExecute}}
	n3.CreationTimestamp = metav1.Now() // the fake clientset sets none; the API server does
	const pid1 = "aws:///us-east-1a/i-0123456789abcdef0"
	n1 := testNode("n1") // drained, then deleted: its termination finalizer lets the agent delete it
	n1.Finalizers = []string{events.FinalizerTermination}
	n1.Spec.ProviderID = pid1 // nc-1's instance: the NodeClaim the agent creates makes it Dovetail's
	n1.CreationTimestamp = n3.CreationTimestamp
	e := newEnv(t, clock.RealClock{}, 0, 0, -1, n1, testNode("n2"), n3, testPod("app", "n1"), testPod("on-n3", "n3"), testPod("pending", ""))
	e.waitSynced(t)
	rev := settled(t, e.agent.Watcher())
	if _, err := e.kube.CoreV1().Pods("default").Create(e.ctx, testPod("late", "n2"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "late pod", func() bool { return e.agent.Watcher().NodePodsChangedSince("n2", rev) })
	// Decided a minute before the Nodes registered: a CreateNodeClaim may not record the
	// instance of a Node older than its decision (kube claimedInstanceReason).
	decided := metav1.NewTime(n1.CreationTimestamp.Add(-time.Minute))
	poolLabel := map[string]string{apisv1.LabelNodePool: "default"}
	nc := &apisv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "nc-1", Labels: poolLabel, CreationTimestamp: decided}, Status: apisv1.NodeClaimStatus{ProviderID: pid1}}
	// nc-3 holds what its RegisterNode writes (the agent applies only the NodeClaim's own).
	nc3 := &apisv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "nc-3", Labels: poolLabel, CreationTimestamp: decided, Finalizers: []string{events.FinalizerTermination},
		Annotations: map[string]string{"karpenter.sh/nodepool-hash": "1"}},
		Spec: apisv1.NodeClaimSpec{TerminationGracePeriod: &metav1.Duration{Duration: time.Hour}}, Status: apisv1.NodeClaimStatus{ProviderID: pid3}}
	apply := func(rev int64, cmds ...*events.Command) {
		t.Helper()
		for _, c := range cmds {
			c.Cluster, c.SnapshotRevision = cluster, rev
			data, err := events.NewEvent(cluster, "provision", events.TypeCommand, c.ID, c)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(e.ctx, 5*time.Second)
			err = e.agent.HandleCommand(ctx, queue.Message{Data: data})
			cancel()
			if err != nil {
				t.Fatalf("command %s (%s): %v", c.ID, c.Kind, err)
			}
		}
	}
	apply(rev,
		&events.Command{ID: "1", Kind: events.CommandCreateNodeClaim, NodeClaim: nc},
		&events.Command{ID: "1b", Kind: events.CommandCreateNodeClaim, NodeClaim: nc3})
	eventually(t, "nc-1 cached", func() bool {
		c, _ := e.agent.Watcher().NodeClaim("nc-1")
		return c != nil && c.Status.ProviderID == pid1
	})
	apply(rev,
		&events.Command{ID: "2", Kind: events.CommandTaintNode, NodeName: "n1", Taint: &corev1.Taint{Key: apisv1.TaintKeyDisrupted, Effect: corev1.TaintEffectNoSchedule}},
		&events.Command{ID: "3", Kind: events.CommandDrainNode, NodeName: "n1"},
		&events.Command{ID: "4", Kind: events.CommandDeleteNode, NodeName: "n1"},
		&events.Command{ID: "5", Kind: events.CommandDeleteNodeClaim, NodeClaim: &apisv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "nc-1"}}},
		&events.Command{ID: "6", Kind: events.CommandMarkUnavailable, Unavailable: []events.UnavailableOfferingMark{{OfferingKey: events.OfferingKey{InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: "spot"}}}},
		&events.Command{ID: "7", Kind: events.CommandMarkUnavailable, Unavailable: []events.UnavailableOfferingMark{{OfferingKey: events.OfferingKey{InstanceType: "c5.large", Zone: "us-east-1a", CapacityType: "spot"}}}},
		&events.Command{ID: "8", Kind: events.CommandDrainNode, NodeName: "n2"}, // stale: refused with an Event
	)
	// The lifecycle of nc-3 on n3, decided on a snapshot that has nc-3.
	eventually(t, "nc-3 cached", func() bool {
		c, _ := e.agent.Watcher().NodeClaim("nc-3")
		return c != nil && c.Status.ProviderID == pid3
	})
	rev2 := e.agent.Watcher().Revision()
	claim3 := &apisv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "nc-3"}}
	grace := int64(0)
	apply(rev2,
		&events.Command{ID: "9", Kind: events.CommandRegisterNode, NodeName: "n3", NodeClaim: claim3, Finalizer: events.FinalizerTermination,
			Labels: map[string]string{apisv1.LabelNodePool: "default"}, Annotations: map[string]string{"karpenter.sh/nodepool-hash": "1"},
			Taints: []corev1.Taint{apisv1.PlannedTaint("nc-3")}},
		&events.Command{ID: "10", Kind: events.CommandSetNodeClaimStatus, NodeClaim: &apisv1.NodeClaim{ObjectMeta: claim3.ObjectMeta, Status: apisv1.NodeClaimStatus{
			NodeName: "n3", Conditions: []metav1.Condition{{Type: apisv1.ConditionRegistered, Status: metav1.ConditionTrue, Reason: "Registered"}}}}},
		&events.Command{ID: "11", Kind: events.CommandLabelNode, NodeName: "n3", Labels: map[string]string{"karpenter.sh/initialized": "true"}},
		&events.Command{ID: "12", Kind: events.CommandNominatePods, NodeName: "n3", Pods: []events.PodRef{{Namespace: "default", Name: "pending", UID: "uid-pending"}},
			Toleration: &corev1.Toleration{Key: apisv1.TaintKeyPlanned, Operator: corev1.TolerationOpEqual, Value: "nc-3", Effect: corev1.TaintEffectNoSchedule}},
		&events.Command{ID: "12b", Kind: events.CommandUntaintNode, NodeName: "n3", Taint: &corev1.Taint{Key: apisv1.TaintKeyPlanned, Effect: corev1.TaintEffectNoSchedule}},
	)
	// nc-3 and n3 are deleted (the termination finalizers hold them), the lifecycle function
	// finds the instance terminated, and the agent releases both.
	deleting := metav1.NewTime(time.Now())
	u, err := e.dyn.Resource(kube.NodeClaimGVR).Get(e.ctx, "nc-3", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u.SetDeletionTimestamp(&deleting)
	if _, err := e.dyn.Resource(kube.NodeClaimGVR).Update(e.ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	node3, err := e.kube.CoreV1().Nodes().Get(e.ctx, "n3", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node3.DeletionTimestamp = &deleting
	if _, err := e.kube.CoreV1().Nodes().Update(e.ctx, node3, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "nc-3 and n3 deleting", func() bool {
		c, _ := e.agent.Watcher().NodeClaim("nc-3")
		n := e.agent.Watcher().Node("n3")
		return c != nil && c.DeletionTimestamp != nil && n != nil && n.DeletionTimestamp != nil
	})
	gone := &events.InstanceEvidence{ProviderID: pid3, State: events.InstanceTerminated}
	apply(e.agent.Watcher().Revision(),
		// Past nc-3's terminationGracePeriod the termination path deletes what is left.
		&events.Command{ID: "13", Kind: events.CommandDeletePods, NodeName: "n3", Pods: []events.PodRef{{Namespace: "default", Name: "on-n3", UID: "uid-on-n3", GracePeriodSeconds: &grace}}},
		&events.Command{ID: "14", Kind: events.CommandRemoveFinalizer, NodeClaim: claim3, Finalizer: events.FinalizerTermination, Instance: gone},
		&events.Command{ID: "15", Kind: events.CommandRemoveFinalizer, NodeName: "n3", Finalizer: events.FinalizerTermination, Instance: gone},
	)
	// NodeClass and NodePool status, and the NodeClass finalizer.
	class := &apisv1.EC2NodeClass{TypeMeta: metav1.TypeMeta{APIVersion: apisv1.AWSGroup + "/v1", Kind: apisv1.KindEC2NodeClass}, ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	pool := &apisv1.NodePool{TypeMeta: metav1.TypeMeta{APIVersion: apisv1.GroupVersion, Kind: "NodePool"}, ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	discount := "-10%"
	overlay := &apisv1.NodeOverlay{ObjectMeta: metav1.ObjectMeta{Name: "savings-plan"}, Spec: apisv1.NodeOverlaySpec{PriceAdjustment: &discount}}
	for _, o := range []struct {
		obj  any
		gvr  schema.GroupVersionResource
		kind string
	}{{class, kube.EC2NodeClassGVR, apisv1.KindEC2NodeClass}, {pool, kube.NodePoolGVR, "NodePool"}, {overlay, kube.NodeOverlayGVR, apisv1.KindNodeOverlay}} {
		u, err := kube.ToUnstructured(o.obj, o.gvr.GroupVersion().String(), o.kind)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.dyn.Resource(o.gvr).Create(e.ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	notReady := []metav1.Condition{{Type: apisv1.ConditionReady, Status: metav1.ConditionFalse, Reason: apisv1.ReasonUnhealthyDependents, Message: "SubnetsReady=False"}}
	ref := apisv1.NodeClassOf(&apisv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}})
	apply(e.agent.Watcher().Revision(),
		&events.Command{ID: "16", Kind: events.CommandAddFinalizer, NodeClass: &ref, Finalizer: events.FinalizerNodeClassTermination},
		&events.Command{ID: "17", Kind: events.CommandSetNodeClassStatus, NodeClass: &apisv1.NodeClass{EC2: &apisv1.EC2NodeClass{
			ObjectMeta: metav1.ObjectMeta{Name: "default"}, Status: apisv1.EC2NodeClassStatus{Conditions: notReady}}}},
		&events.Command{ID: "18", Kind: events.CommandSetNodePoolStatus, NodePool: &apisv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"},
			Status: apisv1.NodePoolStatus{Conditions: []metav1.Condition{{Type: apisv1.ConditionNodeClassReady, Status: metav1.ConditionFalse,
				Reason: apisv1.ReasonNodeClassNotReady, Message: "EC2NodeClass default is not ready"},
				{Type: apisv1.ConditionValidationSucceeded, Status: metav1.ConditionFalse, Reason: apisv1.ReasonNotSupported,
					Message: "spec.replicas: static NodePools (a fixed node count) are not supported by Dovetail yet"}}}}},
		&events.Command{ID: "18b", Kind: events.CommandSetNodeOverlayStatus, NodeOverlay: &apisv1.NodeOverlay{ObjectMeta: metav1.ObjectMeta{Name: "savings-plan"},
			Status: apisv1.NodeOverlayStatus{Conditions: []metav1.Condition{
				{Type: apisv1.ConditionValidationSucceeded, Status: metav1.ConditionTrue, Reason: apisv1.ConditionValidationSucceeded},
				{Type: apisv1.ConditionReady, Status: metav1.ConditionTrue, Reason: apisv1.ConditionReady}}}}},
	)
	// A ProvisioningRequest's conditions, decided by the provision function.
	prq := &apisv1.ProvisioningRequest{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "train", UID: "uid-train"},
		Spec: apisv1.ProvisioningRequestSpec{ProvisioningClassName: apisv1.ProvisioningClassCheckCapacity,
			PodSets: []apisv1.PodSet{{PodTemplateRef: apisv1.Reference{Name: "trainer"}, Count: 2}}}}
	upr, err := kube.ToUnstructured(prq, kube.ProvisioningRequestGVR.GroupVersion().String(), kube.KindProvisioningRequest)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.dyn.Resource(kube.ProvisioningRequestGVR).Namespace("default").Create(e.ctx, upr, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	apply(e.agent.Watcher().Revision(),
		&events.Command{ID: "18c", Kind: events.CommandSetProvisioningRequestStatus, ProvisioningRequest: &apisv1.ProvisioningRequest{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "train", UID: "uid-train"},
			Status: apisv1.ProvisioningRequestStatus{Conditions: []metav1.Condition{
				{Type: apisv1.ProvisioningRequestAccepted, Status: metav1.ConditionTrue, Reason: "Accepted"},
				{Type: apisv1.ProvisioningRequestProvisioned, Status: metav1.ConditionTrue, Reason: "CapacityIsFound"}}}}},
	)
	// The NodeClass is deleted (its finalizer holds it) and no NodeClaim uses it: released.
	uc, err := e.dyn.Resource(kube.EC2NodeClassGVR).Get(e.ctx, "default", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	uc.SetDeletionTimestamp(&deleting)
	if _, err := e.dyn.Resource(kube.EC2NodeClassGVR).Update(e.ctx, uc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	apply(e.agent.Watcher().Revision(),
		&events.Command{ID: "19", Kind: events.CommandRemoveFinalizer, NodeClass: &ref, Finalizer: events.FinalizerNodeClassTermination},
	)
	// A pod's FailedScheduling twice with different reasons: one Event, counted twice (get, patch).
	pending := corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: "default", Name: "pending", UID: "uid-pending"}
	apply(e.agent.Watcher().Revision(),
		&events.Command{ID: "20", Kind: events.CommandRecordEvents, Events: []events.EventRecord{kevents.FailedSchedulingEvent(pending, "no instance type fits")}},
		&events.Command{ID: "21", Kind: events.CommandRecordEvents, Events: []events.EventRecord{kevents.FailedSchedulingEvent(pending, "nodepool \"gpu\": limits exceeded")}},
	)
	var calls []k8stesting.Action
	calls = append(calls, e.kube.Actions()...)
	calls = append(calls, e.dyn.Actions()...)
	seen := map[string]bool{}
	for _, a := range calls {
		res := a.GetResource().Resource
		if a.GetSubresource() != "" {
			res += "/" + a.GetSubresource()
		}
		// The test itself created the "late" pod, the NodeClass and the NodePool, and marked
		// n3, nc-3 and the NodeClass deleting (update, a verb the agent never uses); every other
		// call is the agent's.
		if a.GetVerb() == "create" && (res == "pods" || res == "ec2nodeclasses" || res == "nodepools" || res == "nodeoverlays" || res == "provisioningrequests") ||
			a.GetVerb() == "update" && (res == "nodes" || res == "nodeclaims" || res == "ec2nodeclasses") {
			continue
		}
		// The server version (GET /version, a non-resource URL) is readable by every client:
		// the API server's default ClusterRole system:public-info-viewer grants it to
		// system:authenticated and system:unauthenticated.
		if a.GetVerb() == "get" && res == "version" && a.GetResource().Group == "" {
			continue
		}
		key := a.GetVerb() + " " + a.GetResource().Group + "/" + res
		seen[key] = true
		if !allowed(rules, a.GetVerb(), a.GetResource().Group, res, a.GetNamespace(), actionName(a)) {
			t.Errorf("rbac.yaml does not allow: %s in namespace %q name %q", key, a.GetNamespace(), actionName(a))
		}
	}
	// The run must have exercised every write the agent can make, the reads of its
	// read-modify-write commands, and the informers' reads of the volume kinds (list and watch
	// of PVCs, PVs, StorageClasses and VolumeAttachments).
	for _, k := range []string{"create karpenter.sh/nodeclaims", "patch karpenter.sh/nodeclaims/status", "delete karpenter.sh/nodeclaims",
		"patch karpenter.sh/nodeclaims", "get karpenter.sh/nodeclaims",
		"get /nodes", "patch /nodes", "delete /nodes", "create /pods/eviction", "get /pods", "patch /pods", "delete /pods",
		"create /events", "get /events", "patch /events", "create /configmaps", "patch /configmaps",
		"list /persistentvolumeclaims", "watch /persistentvolumeclaims", "list /persistentvolumes", "watch /persistentvolumes",
		"list storage.k8s.io/storageclasses", "watch storage.k8s.io/storageclasses",
		"list storage.k8s.io/volumeattachments", "watch storage.k8s.io/volumeattachments",
		"get karpenter.k8s.aws/ec2nodeclasses", "patch karpenter.k8s.aws/ec2nodeclasses", "patch karpenter.k8s.aws/ec2nodeclasses/status",
		"get karpenter.sh/nodepools", "patch karpenter.sh/nodepools/status",
		"list karpenter.sh/nodeoverlays", "watch karpenter.sh/nodeoverlays", "get karpenter.sh/nodeoverlays", "patch karpenter.sh/nodeoverlays/status",
		"list autoscaling.x-k8s.io/provisioningrequests", "watch autoscaling.x-k8s.io/provisioningrequests",
		"get autoscaling.x-k8s.io/provisioningrequests", "patch autoscaling.x-k8s.io/provisioningrequests/status",
		"list /podtemplates", "watch /podtemplates"} {
		if !seen[k] {
			t.Errorf("scenario did not exercise %s", k)
		}
	}
	upr, _ = e.dyn.Resource(kube.ProvisioningRequestGVR).Namespace("default").Get(e.ctx, "train", metav1.GetOptions{})
	var gotPR apisv1.ProvisioningRequest
	if err := kube.FromUnstructured(upr, &gotPR); err != nil {
		t.Fatal(err)
	}
	if len(gotPR.Status.Conditions) != 2 || gotPR.Status.Conditions[1].LastTransitionTime.IsZero() {
		t.Errorf("ProvisioningRequest after SetProvisioningRequestStatus: conditions %+v, want Accepted and Provisioned with their times", gotPR.Status.Conditions)
	}
	// The status commands took effect, and each False turn left a Warning Event.
	uo, _ := e.dyn.Resource(kube.NodeOverlayGVR).Get(e.ctx, "savings-plan", metav1.GetOptions{})
	var gotOverlay apisv1.NodeOverlay
	if err := kube.FromUnstructured(uo, &gotOverlay); err != nil {
		t.Fatal(err)
	}
	if len(gotOverlay.Status.Conditions) != 2 {
		t.Errorf("NodeOverlay after SetNodeOverlayStatus: conditions %+v, want ValidationSucceeded and Ready", gotOverlay.Status.Conditions)
	}
	u, _ = e.dyn.Resource(kube.EC2NodeClassGVR).Get(e.ctx, "default", metav1.GetOptions{})
	var gotClass apisv1.EC2NodeClass
	if err := kube.FromUnstructured(u, &gotClass); err != nil {
		t.Fatal(err)
	}
	if len(gotClass.Status.Conditions) != 1 || gotClass.Status.Conditions[0].LastTransitionTime.IsZero() || len(gotClass.Finalizers) != 0 {
		t.Errorf("NodeClass after the commands: conditions %+v finalizers %v", gotClass.Status.Conditions, gotClass.Finalizers)
	}
	evs, _ := e.kube.CoreV1().Events("default").List(e.ctx, metav1.ListOptions{})
	notReadyEvents := map[string]bool{}
	for _, ev := range evs.Items {
		if ev.Reason == kube.ReasonNodeClassNotReady {
			notReadyEvents[ev.InvolvedObject.Kind] = true
		}
		if ev.Reason == kube.ReasonNodePoolInvalid && strings.Contains(ev.Message, "spec.replicas") {
			notReadyEvents["invalid NodePool"] = true
		}
	}
	if !notReadyEvents[apisv1.KindEC2NodeClass] || !notReadyEvents["NodePool"] || !notReadyEvents["invalid NodePool"] {
		t.Errorf("events on %v, want NodeClassNotReady on the EC2NodeClass and the NodePool, NodePoolInvalid naming spec.replicas", notReadyEvents)
	}
	// The lifecycle commands took effect (not answered early by a refusal or an absence).
	n, _ := e.kube.CoreV1().Nodes().Get(e.ctx, "n3", metav1.GetOptions{})
	if n.Labels["karpenter.sh/initialized"] != "true" || len(n.Spec.Taints) != 0 || len(n.Finalizers) != 0 {
		t.Errorf("n3 after the lifecycle: labels %v taints %v finalizers %v", n.Labels, n.Spec.Taints, n.Finalizers)
	}
	if p, _ := e.kube.CoreV1().Pods("default").Get(e.ctx, "pending", metav1.GetOptions{}); p.Status.NominatedNodeName != "" ||
		len(p.Spec.Tolerations) != 1 || p.Spec.Tolerations[0].Key != apisv1.TaintKeyPlanned || p.Spec.Tolerations[0].Value != "nc-3" {
		t.Errorf("pending pod nominated %q tolerations %+v, want no nomination and the planned toleration", p.Status.NominatedNodeName, p.Spec.Tolerations)
	}
	// Karpenter's counters for what the writes completed: two NodeClaims created for the
	// provision function (neither names a pool), one Node registered (n3 lost
	// karpenter.sh/unregistered), none terminated (neither nc-3 nor n3 was being deleted when
	// its finalizer went). Command outcomes: the stale drain (8) refused.
	m := e.metrics
	for _, c := range []struct {
		got, want float64
		what      string
	}{
		{m.Value(telemetry.NodeClaimsCreated, "provisioned", "default", "false"), 2, "NodeClaims created"},
		{m.Value(telemetry.NodesCreated, "default", ""), 1, "Nodes created"},
		{m.Value(telemetry.NodeClaimsTerminated, "default", "", ""), 1, "NodeClaims terminated (nc-3, released while deleting)"},
		{m.Value(telemetry.CommandsApplied, string(events.CommandDrainNode), "refused"), 1, "refused drains"},
		{m.Value(telemetry.CommandsApplied, string(events.CommandRegisterNode), "applied"), 1, "registrations applied"},
	} {
		if c.got != c.want {
			t.Errorf("%s = %g, want %g", c.what, c.got, c.want)
		}
	}
}

// settled returns the watcher's revision once it has not moved for 50 ms: the informers'
// initial events can still arrive after the caches report synced, and a revision read before
// them makes the commands decided on it stale.
func settled(t *testing.T, w *kube.Watcher) int64 {
	t.Helper()
	last, since := w.Revision(), time.Now()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cur := w.Revision(); cur != last {
			last, since = cur, time.Now()
		} else if time.Since(since) >= 50*time.Millisecond {
			return last
		}
	}
	t.Fatal("the watcher's revision never settled")
	return 0
}

// The NodeClass commands (SetNodeClassStatus, the termination finalizer) patch the NodeClass of
// either cloud through the same code (kube.NodeClassGVR of the command's kind), so rbac.yaml
// grants AKSNodeClass what TestRBACCoversEveryCall sees the agent use on EC2NodeClass. Found
// on AKS: rbac.yaml granted aksnodeclasses read only, and a real API server refused the agent's
// status and finalizer patches there (the in-memory cluster of local dev checks no RBAC).
func TestRBACCoversNodeClassCommandsOfEveryKind(t *testing.T) {
	rules := loadRBAC(t)
	for _, kind := range []string{apisv1.KindEC2NodeClass, apisv1.KindAKSNodeClass} {
		gvr, err := kube.NodeClassGVR(kind)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range [][2]string{{"get", gvr.Resource}, {"list", gvr.Resource}, {"watch", gvr.Resource},
			{"patch", gvr.Resource}, {"patch", gvr.Resource + "/status"}} {
			if !allowed(rules, c[0], gvr.Group, c[1], "", "default") {
				t.Errorf("%s: rbac.yaml does not allow %s %s/%s", kind, c[0], gvr.Group, c[1])
			}
		}
	}
}
