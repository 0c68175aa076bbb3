//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/dovetail-dev/dovetail/agent"
	"github.com/dovetail-dev/dovetail/events"
	"github.com/dovetail-dev/dovetail/localdev"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	dvaws "github.com/dovetail-dev/dovetail/shared/cloud/aws"
	"github.com/dovetail-dev/dovetail/shared/cloud/aws/ec2class"
	"github.com/dovetail-dev/dovetail/shared/cloud/fake/ec2api"
	"github.com/dovetail-dev/dovetail/shared/disruption"
	"github.com/dovetail-dev/dovetail/shared/kube"
)

// nodeClassRefresh is how often the e2e environment resolves a Ready NodeClass again.
const nodeClassRefresh = 2 * time.Second

func ec2NodeClass(ctx context.Context, t *testing.T, env *localdev.Env, name string) (*apisv1.EC2NodeClass, error) {
	t.Helper()
	u, err := env.Cluster.Dynamic.Resource(kube.EC2NodeClassGVR).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	var nc apisv1.EC2NodeClass
	if err := kube.FromUnstructured(u, &nc); err != nil {
		t.Fatal(err)
	}
	return &nc, nil
}

func nodePool(ctx context.Context, t *testing.T, env *localdev.Env, name string) *apisv1.NodePool {
	t.Helper()
	u, err := env.Cluster.Dynamic.Resource(kube.NodePoolGVR).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var np apisv1.NodePool
	if err := kube.FromUnstructured(u, &np); err != nil {
		t.Fatal(err)
	}
	return &np
}

// table reads `kubectl get <resource>` as the server renders it (the CRD's printer columns).
func table(ctx context.Context, t *testing.T, env *localdev.Env, path string) (map[string]int, [][]any) {
	t.Helper()
	kc, err := kubernetes.NewForConfig(env.ControlPlane.Config)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := kc.CoreV1().RESTClient().Get().AbsPath(path).SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var tb metav1.Table
	if err := json.Unmarshal(raw, &tb); err != nil {
		t.Fatal(err)
	}
	col := map[string]int{}
	for i, c := range tb.ColumnDefinitions {
		col[strings.ToUpper(c.Name)] = i
	}
	var rows [][]any
	for _, r := range tb.Rows {
		rows = append(rows, r.Cells)
	}
	return col, rows
}

// checkNodeClassReady: the seed EC2NodeClass (spec.role) reaches Ready=True with subnets,
// security groups, AMIs and the instance profile the lifecycle function created in status,
// carries the termination finalizer, and every launch template the fleet used names that
// profile; the seed NodePool is Ready and counts its nodes (kubectl get nodepools, ec2nodeclasses).
func checkNodeClassReady(ctx context.Context, t *testing.T, env *localdev.Env) {
	nc, err := ec2NodeClass(ctx, t, env, "default")
	if err != nil {
		t.Fatal(err)
	}
	wantProfile := dvaws.InstanceProfileName("e2e", "us-east-1", string(nc.UID), nc.Spec.Role)
	st := nc.Status
	if !meta.IsStatusConditionTrue(st.Conditions, apisv1.ConditionReady) || len(st.Subnets) != 6 || len(st.SecurityGroups) != 1 ||
		len(st.AMIs) != 5 || st.InstanceProfile != wantProfile {
		t.Fatalf("EC2NodeClass default: Ready %v, %d subnets, %d security groups, %d AMIs, profile %q (want True, 6, 1, 5, %q); conditions %+v",
			meta.IsStatusConditionTrue(st.Conditions, apisv1.ConditionReady), len(st.Subnets), len(st.SecurityGroups), len(st.AMIs), st.InstanceProfile, wantProfile, st.Conditions)
	}
	for _, c := range st.Conditions {
		if c.LastTransitionTime.IsZero() || c.Reason == "" {
			t.Errorf("condition %s lacks a reason or lastTransitionTime: %+v", c.Type, c)
		}
	}
	if len(nc.Finalizers) != 1 || nc.Finalizers[0] != events.FinalizerNodeClassTermination {
		t.Errorf("finalizers %v, want [%s]", nc.Finalizers, events.FinalizerNodeClassTermination)
	}
	roles, tags, ok := env.EC2API.InstanceProfile(wantProfile)
	if !ok || len(roles) != 1 || roles[0] != nc.Spec.Role || tags[apisv1.TagCluster] != "e2e" {
		t.Errorf("instance profile %s in the fake's IAM: exists %v roles %v tags %v", wantProfile, ok, roles, tags)
	}
	templates := env.EC2API.RequestsOf("CreateLaunchTemplate")
	if len(templates) == 0 {
		t.Fatal("no CreateLaunchTemplate recorded")
	}
	for _, in := range templates {
		d := in.(*ec2.CreateLaunchTemplateInput).LaunchTemplateData
		if d.IamInstanceProfile == nil || aws.ToString(d.IamInstanceProfile.Name) != wantProfile {
			t.Errorf("launch template %s: instance profile %+v, want %s", aws.ToString(in.(*ec2.CreateLaunchTemplateInput).LaunchTemplateName), d.IamInstanceProfile, wantProfile)
		}
	}
	col, rows := table(ctx, t, env, "/apis/karpenter.k8s.aws/v1/ec2nodeclasses")
	if len(rows) != 1 || fmt.Sprint(rows[0][col["READY"]]) != "True" {
		t.Errorf("kubectl get ec2nodeclasses: %v (columns %v), want one row READY True", rows, col)
	}
	claims := 0
	for _, c := range nodeClaims(ctx, t, env) {
		if c.Labels[apisv1.LabelNodePool] == "default" {
			claims++
		}
	}
	np := nodePool(ctx, t, env, "default")
	if !meta.IsStatusConditionTrue(np.Status.Conditions, apisv1.ConditionReady) || np.Status.Nodes == nil || int(*np.Status.Nodes) != claims ||
		np.Status.Resources.Cpu().IsZero() {
		t.Errorf("NodePool default status %+v, want Ready with %d nodes and their CPU", np.Status, claims)
	}
	col, rows = table(ctx, t, env, "/apis/karpenter.sh/v1/nodepools")
	for _, r := range rows {
		if fmt.Sprint(r[col["NAME"]]) == "default" && (fmt.Sprint(r[col["READY"]]) != "True" || fmt.Sprint(r[col["NODES"]]) != fmt.Sprint(claims)) {
			t.Errorf("kubectl get nodepools: %v, want READY True and NODES %d", r, claims)
		}
	}
	t.Logf("EC2NodeClass default Ready: %d subnets, %d SGs, %d AMIs, instance profile %s on all %d launch templates; NodePool default Ready, %d nodes",
		len(st.Subnets), len(st.SecurityGroups), len(st.AMIs), wantProfile, len(templates), claims)
}

// checkNotReadyClassLaunchesNothing: a NodeClass whose subnet selector matches nothing shows
// SubnetsReady=False, its NodePool NodeClassReady=False with a Warning Event, and a pod only that
// pool could take stays pending with no NodeClaim launched. Deleting the class then releases its
// finalizer.
func checkNotReadyClassLaunchesNothing(ctx context.Context, t *testing.T, env *localdev.Env) {
	dyn := env.Cluster.Dynamic
	seed, err := ec2NodeClass(ctx, t, env, "default")
	if err != nil {
		t.Fatal(err)
	}
	// The seed class's security groups and role; subnets of a cluster that does not exist.
	class := &apisv1.EC2NodeClass{TypeMeta: metav1.TypeMeta{APIVersion: apisv1.AWSGroup + "/v1", Kind: apisv1.KindEC2NodeClass},
		ObjectMeta: metav1.ObjectMeta{Name: "nowhere"}, Spec: apisv1.EC2NodeClassSpec{
			Role:                       seed.Spec.Role,
			AMISelectorTerms:           []apisv1.AMISelectorTerm{{Alias: "al2023@latest"}},
			SubnetSelectorTerms:        []apisv1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "no-such-cluster"}}},
			SecurityGroupSelectorTerms: seed.Spec.SecurityGroupSelectorTerms,
		}}
	consolidateAfter := apisv1.MustParseNillableDuration("30s")
	pool := &apisv1.NodePool{TypeMeta: metav1.TypeMeta{APIVersion: apisv1.GroupVersion, Kind: "NodePool"}, ObjectMeta: metav1.ObjectMeta{Name: "nowhere"},
		Spec: apisv1.NodePoolSpec{Disruption: apisv1.Disruption{ConsolidationPolicy: apisv1.ConsolidationPolicyWhenEmptyOrUnderutilized, ConsolidateAfter: &consolidateAfter},
			Template: apisv1.NodeClaimTemplate{ObjectMeta: apisv1.ObjectMeta{Labels: map[string]string{"dovetail.dev/e2e": "nowhere"}},
				Spec: apisv1.NodeClaimSpec{NodeClassRef: &apisv1.NodeClassReference{Group: apisv1.AWSGroup, Kind: apisv1.KindEC2NodeClass, Name: "nowhere"},
					Requirements: []apisv1.NodeSelectorRequirementWithMinValues{{NodeSelectorRequirement: corev1.NodeSelectorRequirement{
						Key: apisv1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{apisv1.CapacityTypeOnDemand}}}}}}}}
	for _, o := range []struct {
		obj  any
		gvr  schema.GroupVersionResource
		kind string
	}{{class, kube.EC2NodeClassGVR, apisv1.KindEC2NodeClass}, {pool, kube.NodePoolGVR, "NodePool"}} {
		u, err := kube.ToUnstructured(o.obj, o.gvr.GroupVersion().String(), o.kind)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := dyn.Resource(o.gvr).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	kc := env.Cluster.Kube
	if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: lifecycleNS}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "nowhere", Namespace: lifecycleNS}, Spec: corev1.PodSpec{
		NodeSelector: map[string]string{"dovetail.dev/e2e": "nowhere"},
		Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("100m")}}}}}}
	if _, err := kc.CoreV1().Pods(lifecycleNS).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var np *apisv1.NodePool
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		np = nodePool(ctx, t, env, "nowhere")
		c := meta.FindStatusCondition(np.Status.Conditions, apisv1.ConditionNodeClassReady)
		return c != nil && c.Status == metav1.ConditionFalse, nil
	}); err != nil {
		t.Fatalf("NodePool nowhere never showed NodeClassReady=False: %+v", np.Status)
	}
	nc, err := ec2NodeClass(ctx, t, env, "nowhere")
	if err != nil {
		t.Fatal(err)
	}
	sub := meta.FindStatusCondition(nc.Status.Conditions, apisv1.ConditionSubnetsReady)
	if sub == nil || sub.Status != metav1.ConditionFalse || sub.Reason != apisv1.ReasonSubnetsNotFound {
		t.Errorf("EC2NodeClass nowhere SubnetsReady %+v, want False %s", sub, apisv1.ReasonSubnetsNotFound)
	}
	// The Event crosses the queue and the agent like the status did; the poll ends when it is
	// there, so its bound (was 10 s) only ends a failing test.
	var ev *corev1.Event
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := kc.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for i := range list.Items {
			if e := &list.Items[i]; e.InvolvedObject.Kind == "NodePool" && e.InvolvedObject.Name == "nowhere" && e.Reason == kube.ReasonNodeClassNotReady {
				ev = e
			}
		}
		return ev != nil, nil
	}); err != nil {
		t.Errorf("no %s Event on NodePool nowhere", kube.ReasonNodeClassNotReady)
	} else if !strings.Contains(ev.Message, "subnetSelectorTerms") || ev.Type != corev1.EventTypeWarning {
		t.Errorf("Event %s %q, want a Warning naming the subnet selector", ev.Type, ev.Message)
	}
	// Two batch windows later the pod is still pending and no NodeClaim of the pool exists.
	time.Sleep(12 * time.Second)
	for _, c := range nodeClaims(ctx, t, env) {
		if c.Labels[apisv1.LabelNodePool] == "nowhere" {
			t.Errorf("NodeClaim %s launched for a NodePool whose NodeClass is not Ready", c.Name)
		}
	}
	if p, err := kc.CoreV1().Pods(lifecycleNS).Get(ctx, "nowhere", metav1.GetOptions{}); err != nil || p.Spec.NodeName != "" {
		t.Errorf("pod nowhere: %v on node %q, want pending", err, p.Spec.NodeName)
	}
	t.Logf("NodeClass nowhere: %s; NodePool Event: %s", sub.Message, ev.Message)

	// Clean up: the class goes once its finalizer is released (no NodeClaim uses it).
	_ = kc.CoreV1().Pods(lifecycleNS).Delete(ctx, "nowhere", metav1.DeleteOptions{})
	if err := dyn.Resource(kube.NodePoolGVR).Delete(ctx, "nowhere", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := dyn.Resource(kube.EC2NodeClassGVR).Delete(ctx, "nowhere", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := ec2NodeClass(ctx, t, env, "nowhere")
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		nc, _ := ec2NodeClass(ctx, t, env, "nowhere")
		t.Errorf("EC2NodeClass nowhere not deleted: finalizers %v", nc.Finalizers)
	}
}

// checkAMIDriftOnRefresh: a new image published behind the seed class's alias appears in its
// status on the next status pass, and then every running arm64 NodeClaim reads as AMI drift.
func checkAMIDriftOnRefresh(ctx context.Context, t *testing.T, env *localdev.Env) {
	seed, err := ec2NodeClass(ctx, t, env, "default")
	if err != nil {
		t.Fatal(err)
	}
	alias := seed.Alias()
	if alias == nil {
		t.Fatalf("the seed EC2NodeClass has no alias: %+v", seed.Spec.AMISelectorTerms)
	}
	// The new release is named as its family's releases are (the fake, like a node, reads the
	// user data as the image's family; it tells the family by the name, and any other name boots
	// as Custom, with none of Dovetail's configuration).
	name := map[string]string{
		apisv1.AMIFamilyAL2023:       "amazon-eks-node-al2023-arm64-standard-1.37-v20261215",
		apisv1.AMIFamilyBottlerocket: "bottlerocket-aws-k8s-1.37-aarch64-v1.51.0-e2e",
		apisv1.AMIFamilyAL2:          "amazon-eks-arm64-node-1.37-v20261215",
	}[alias.Family]
	if name == "" {
		t.Fatalf("the seed EC2NodeClass's alias is %s@%s; this check publishes AL2023, Bottlerocket or AL2 releases", alias.Family, alias.Version)
	}
	params, err := dvaws.AliasImages(*alias, "1.37")
	if err != nil {
		t.Fatal(err)
	}
	param := ""
	for _, p := range params {
		if p.Arch == "arm64" && p.Variants[0] == dvaws.VariantStandard {
			param = p.Parameter
		}
	}
	img := env.EC2API.AddImage(ec2types.Image{Name: aws.String(name),
		Architecture: ec2types.ArchitectureValuesArm64, CreationDate: aws.String("2026-12-15T00:00:00.000Z"),
		OwnerId: aws.String(ec2api.AmazonImageAccount), ImageOwnerAlias: aws.String("amazon")}) // a new release behind the alias
	env.EC2API.PutParameter(param, aws.ToString(img.ImageId))
	// The lifecycle function resolves a Ready class again on the first snapshot at least
	// nodeClassRefresh after its last resolve; with the cluster quiet, that is the agent's
	// periodic snapshot, up to agent.DefaultSnapshotInterval away. Then the status command
	// crosses the queue and the agent. Waiting less than that bound fails on a quiet cluster.
	within := agent.DefaultSnapshotInterval + nodeClassRefresh + 20*time.Second
	nc := &apisv1.EC2NodeClass{}
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, within, true, func(ctx context.Context) (bool, error) {
		got, err := ec2NodeClass(ctx, t, env, "default")
		if err != nil {
			return false, err
		}
		nc = got
		for _, a := range nc.Status.AMIs {
			if a.ID == aws.ToString(img.ImageId) {
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatalf("status AMIs never showed %s within %s: %+v", aws.ToString(img.ImageId), within, nc.Status.AMIs)
	}
	np := nodePool(ctx, t, env, "default")
	drifted := 0
	for _, c := range nodeClaims(ctx, t, env) {
		if c.Labels[apisv1.LabelNodePool] != "default" || c.Labels[corev1.LabelArchStable] != "arm64" || c.Status.ImageID == "" {
			continue
		}
		if d := disruption.Drifted(&c, nil, np, apisv1.NodeClassOf(nc), ec2class.Rules{}); d.Kind == ec2class.DriftAMI {
			drifted++
		} else {
			t.Errorf("NodeClaim %s on %s: drift %+v, want %s", c.Name, c.Status.ImageID, d, ec2class.DriftAMI)
		}
	}
	if drifted == 0 {
		t.Error("no arm64 NodeClaim recorded an image to drift from")
	}
	t.Logf("new AMI %s in status; %d arm64 NodeClaims drifted (AMI)", aws.ToString(img.ImageId), drifted)
}
