package awsinfra

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"sigs.k8s.io/yaml"
)

// The module's interface: every variable typed and described, every output described, the
// zips found from the module's own directory (path.module) so a caller elsewhere works.
func TestTerraformModuleInterface(t *testing.T) {
	tf := loadTF(t)
	for name, raw := range get(t, tf, "variable").(map[string]any) {
		v := raw.(map[string]any)
		if v["type"] == nil || v["description"] == nil || v["description"] == "" {
			t.Errorf("variable %s: type %v, description %q; want both", name, v["type"], v["description"])
		}
	}
	for name, raw := range get(t, tf, "output").(map[string]any) {
		if d, _ := raw.(map[string]any)["description"].(string); d == "" {
			t.Errorf("output %s has no description", name)
		}
	}
	if v := get(t, tf, "terraform", "required_version"); v != ">= 1.5" {
		t.Errorf("required_version %v", v)
	}
	if s := get(t, tf, "terraform", "required_providers", "aws", "source"); s != "hashicorp/aws" {
		t.Errorf("aws provider source %v", s)
	}
	if pd, _ := get(t, tf, "locals", "package_dir").(string); !strings.Contains(pd, "${path.module}/../../../dist") {
		t.Errorf("local.package_dir %q: want the repository's dist/ found from path.module", pd)
	}
	if _, err := os.Stat(filepath.Join(tfModuleDir, "../../../hack/package.sh")); err != nil {
		t.Errorf("path.module/../../.. is not the repository root: %v", err)
	}
	for name, raw := range get(t, tf, "resource", "aws_lambda_function").(map[string]any) {
		if f := raw.(map[string]any)["filename"]; f != "${local.package_dir}/"+name+"-arm64.zip" {
			t.Errorf("function %s filename %v", name, f)
		}
	}
}

// requiredVariables are the module's variables without a default.
func requiredVariables(t *testing.T, tf doc) (required, all []string) {
	for name, raw := range get(t, tf, "variable").(map[string]any) {
		all = append(all, name)
		if _, ok := raw.(map[string]any)["default"]; !ok {
			required = append(required, name)
		}
	}
	sort.Strings(required)
	sort.Strings(all)
	return required, all
}

// fenced returns the README's fenced blocks of a language.
func fenced(readme, lang string) []string {
	var out []string
	for _, m := range regexp.MustCompile("(?s)```"+lang+"\n(.*?)```").FindAllStringSubmatch(readme, -1) {
		out = append(out, m[1])
	}
	return out
}

// The README's apply line and module block work: they give every variable without a default and
// name no variable the module lacks, from the module's directory.
func TestREADMEAppliesTheModule(t *testing.T) {
	tf := loadTF(t)
	required, all := requiredVariables(t, tf)
	readme := string(readFile(t, "README.md"))
	var apply string
	for _, b := range fenced(readme, "sh") {
		if strings.Contains(b, "terraform apply") {
			apply = strings.ReplaceAll(b, "\\\n", " ")
		}
	}
	if !strings.Contains(apply, "cd infra/aws/terraform\n") || !strings.Contains(apply, "terraform init && terraform apply ") {
		t.Fatalf("README: no `cd infra/aws/terraform` then `terraform init && terraform apply -var ...` block:\n%s", apply)
	}
	var given []string
	for _, m := range regexp.MustCompile(`-var ([a-z_]+)=`).FindAllStringSubmatch(apply, -1) {
		given = append(given, m[1])
	}
	sort.Strings(given)
	if !slices.Equal(given, required) {
		t.Errorf("README apply line sets %v, want exactly the variables without a default %v", given, required)
	}

	blocks := fenced(readme, "hcl")
	if len(blocks) != 1 {
		t.Fatalf("README: %d hcl blocks, want the module example", len(blocks))
	}
	f, diags := hclsyntax.ParseConfig([]byte(blocks[0]), "README.md", hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	body := f.Body.(*hclsyntax.Body)
	if len(body.Blocks) != 1 || body.Blocks[0].Type != "module" {
		t.Fatalf("README hcl block: want one module block")
	}
	var args []string
	for name, a := range body.Blocks[0].Body.Attributes {
		if name == "source" {
			src, _ := a.Expr.Value(nil)
			if !strings.HasSuffix(src.AsString(), "//infra/aws/terraform") {
				t.Errorf("module source %s: want the module's directory", src.GoString())
			}
			continue
		}
		if !slices.Contains(all, name) {
			t.Errorf("README module block sets %s, which the module does not declare", name)
		}
		args = append(args, name)
	}
	for _, r := range required {
		if !slices.Contains(args, r) {
			t.Errorf("README module block misses the required variable %s", r)
		}
	}
}

// agentServiceAccount is the ServiceAccount agent/rbac.yaml binds its rules to.
func agentServiceAccount(t *testing.T) (namespace, name string) {
	t.Helper()
	for _, d := range bytes.Split(readFile(t, "../../agent/rbac.yaml"), []byte("\n---")) {
		var obj struct {
			Kind     string
			Metadata struct{ Name, Namespace string }
		}
		if err := yaml.Unmarshal(d, &obj); err != nil {
			t.Fatal(err)
		}
		if obj.Kind == "ServiceAccount" {
			return obj.Metadata.Namespace, obj.Metadata.Name
		}
	}
	t.Fatal("agent/rbac.yaml has no ServiceAccount")
	return "", ""
}

// The agent gets its role through EKS Pod Identity in both stacks: the association binds the
// agent role to the ServiceAccount agent/rbac.yaml grants (by default) on the EKS cluster the
// role's trust names.
func TestAgentPodIdentityAssociation(t *testing.T) {
	ns, sa := agentServiceAccount(t)
	tf := loadTF(t)
	a := get(t, tf, "resource", "aws_eks_pod_identity_association", "agent").(map[string]any)
	want := map[string]string{"role_arn": "${aws_iam_role.agent.arn}", "cluster_name": "${var.eks_cluster_name}",
		"namespace": "${var.agent_namespace}", "service_account": "${var.agent_service_account}"}
	for k, v := range want {
		if a[k] != v {
			t.Errorf("terraform association %s = %v, want %s", k, a[k], v)
		}
	}
	if d := get(t, tf, "variable", "agent_namespace", "default"); d != ns {
		t.Errorf("agent_namespace default %v, want agent/rbac.yaml's %s", d, ns)
	}
	if d := get(t, tf, "variable", "agent_service_account", "default"); d != sa {
		t.Errorf("agent_service_account default %v, want agent/rbac.yaml's %s", d, sa)
	}

	sam := load(t, "template.yaml")
	p := func(k string) string {
		return strings.Join(samValue(t, get(t, sam, "Resources", "AgentPodIdentityAssociation", "Properties", k)), ",")
	}
	if typ := get(t, sam, "Resources", "AgentPodIdentityAssociation", "Type"); typ != "AWS::EKS::PodIdentityAssociation" {
		t.Errorf("SAM association type %v", typ)
	}
	for k, v := range map[string]string{"RoleArn": "{AgentRole}", "ClusterName": "{EksClusterName}", "Namespace": "{AgentNamespace}", "ServiceAccount": "{AgentServiceAccount}"} {
		if got := p(k); got != v {
			t.Errorf("SAM association %s = %s, want %s", k, got, v)
		}
	}
	if d := get(t, sam, "Parameters", "AgentNamespace", "Default"); d != ns {
		t.Errorf("SAM AgentNamespace default %v, want %s", d, ns)
	}
	if d := get(t, sam, "Parameters", "AgentServiceAccount", "Default"); d != sa {
		t.Errorf("SAM AgentServiceAccount default %v, want %s", d, sa)
	}
}

// The default Kubernetes version is one EKS still supports, and both stacks default alike.
// Amazon EKS Kubernetes release calendar (docs.aws.amazon.com/eks/latest/userguide/kubernetes-versions.html):
// 1.31's standard support ended 26 November 2025 (the old default), 1.34's 2 December 2026,
// 1.35's ends 27 March 2027. Update the default and this table together.
func TestKubernetesVersionDefaultIsSupported(t *testing.T) {
	standardSupportEnds := map[string]string{"1.35": "2027-03-27"}
	tf := get(t, loadTF(t), "variable", "kubernetes_version", "default")
	sam := get(t, load(t, "template.yaml"), "Parameters", "KubernetesVersion", "Default")
	if tf != sam {
		t.Errorf("terraform kubernetes_version default %v, SAM KubernetesVersion default %v: want one version", tf, sam)
	}
	if _, ok := standardSupportEnds[fmt.Sprint(tf)]; !ok {
		t.Errorf("kubernetes_version default %v is not in the table of versions in EKS standard support %v", tf, standardSupportEnds)
	}
}

// Encryption at rest, in both stacks alike: without a key every queue uses SQS-managed keys
// (SSE-SQS) and the bucket S3-managed keys (SSE-S3); with kms_key_arn / KmsKeyArn every queue and
// the bucket use that key (the bucket with an S3 Bucket Key), and no queue keeps SSE-SQS
// (SqsManagedSseEnabled and KmsMasterKeyId are exclusive: AWS::SQS::Queue reference).
func TestQueuesAndBucketEncryption(t *testing.T) {
	tfQueues := get(t, loadTF(t), "resource", "aws_sqs_queue").(map[string]any)
	for _, g := range []governance{byDefault, withKMS} {
		st := stack
		st.Params = g.sam()
		queues, err := ResolvedProperties(readFile(t, "template.yaml"), st, "AWS::SQS::Queue")
		if err != nil {
			t.Fatal(err)
		}
		if len(queues) != len(tfQueues) || len(queues) != 14 {
			t.Errorf("SAM %d queues, Terraform %d, want the 14 (7 queues, each with its DLQ) in both", len(queues), len(tfQueues))
		}
		for name, q := range queues {
			sse, key := q["SqsManagedSseEnabled"], q["KmsMasterKeyId"]
			if g.kmsKey == "" && (sse != true || key != nil) || g.kmsKey != "" && (sse != nil || key != g.kmsKey) {
				t.Errorf("SAM %s with key %q: SqsManagedSseEnabled %v, KmsMasterKeyId %v", name, g.kmsKey, sse, key)
			}
		}
		buckets, err := ResolvedProperties(readFile(t, "template.yaml"), st, "AWS::S3::Bucket")
		if err != nil {
			t.Fatal(err)
		}
		rule := get(t, buckets["ClaimCheckBucket"], "BucketEncryption", "ServerSideEncryptionConfiguration", 0).(map[string]any)
		byDefault := rule["ServerSideEncryptionByDefault"].(map[string]any)
		want := map[string]any{"SSEAlgorithm": "AES256"}
		wantBucketKey := false
		if g.kmsKey != "" {
			want = map[string]any{"SSEAlgorithm": "aws:kms", "KMSMasterKeyID": g.kmsKey}
			wantBucketKey = true
		}
		if fmt.Sprint(byDefault) != fmt.Sprint(want) || rule["BucketKeyEnabled"] != wantBucketKey {
			t.Errorf("SAM bucket encryption with key %q: %v, BucketKeyEnabled %v; want %v, %v", g.kmsKey, byDefault, rule["BucketKeyEnabled"], want, wantBucketKey)
		}

		e, err := newTFEval(readTFModule(t), stack, g.tf())
		if err != nil {
			t.Fatal(err)
		}
		attr := func(spec map[string]any, name string) cty.Value {
			v, err := e.eval(spec[name], nil)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return v
		}
		for name, raw := range tfQueues {
			q := raw.(map[string]any)
			sse, key := attr(q, "sqs_managed_sse_enabled"), attr(q, "kms_master_key_id")
			ok := g.kmsKey == "" && sse.Equals(cty.True).True() && key.IsNull() ||
				g.kmsKey != "" && sse.IsNull() && !key.IsNull() && key.AsString() == g.kmsKey
			if !ok {
				t.Errorf("terraform aws_sqs_queue.%s with key %q: sqs_managed_sse_enabled %#v, kms_master_key_id %#v", name, g.kmsKey, sse, key)
			}
		}
		enc := get(t, loadTF(t), "resource", "aws_s3_bucket_server_side_encryption_configuration", "claim_check", "rule", 0).(map[string]any)
		def := get(t, enc, "apply_server_side_encryption_by_default", 0).(map[string]any)
		alg, key, bk := attr(def, "sse_algorithm"), attr(def, "kms_master_key_id"), attr(enc, "bucket_key_enabled")
		if alg.AsString() != fmt.Sprint(want["SSEAlgorithm"]) || (g.kmsKey == "") != key.IsNull() || (!key.IsNull() && key.AsString() != g.kmsKey) ||
			bk.True() != wantBucketKey {
			t.Errorf("terraform bucket encryption with key %q: %#v %#v %#v", g.kmsKey, alg, key, bk)
		}
	}
}
