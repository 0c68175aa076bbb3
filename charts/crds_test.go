package charts

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/dovetail-dev/dovetail/shared/apis/crd"
)

// infraCRDs is the one source of truth of the CRDs (checksummed against the releases by
// shared/apis/crd's tests); the chart's crds/ holds copies.
const infraCRDs = "../infra/crds"

// The chart's crds/ files are infra/crds' YAML files, the same names byte for byte (a copy, not a
// symlink: go:embed, which Load reads the chart from, embeds no symlink), so the chart installs exactly the
// checksummed CRDs: Karpenter v1.14.0's NodePool, NodeClaim and EC2NodeClass (the SHA-256 of
// crd.Files), the Azure provider's AKSNodeClass and Cluster Autoscaler's ProvisioningRequest.
func TestCRDsAreInfraCRDs(t *testing.T) {
	crds, err := CRDs()
	if err != nil {
		t.Fatal(err)
	}
	infra, err := filepath.Glob(filepath.Join(infraCRDs, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var got, want []string
	for _, c := range crds {
		got = append(got, c.Name)
	}
	for _, f := range infra {
		want = append(want, "crds/"+filepath.Base(f))
	}
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Fatalf("chart crds/ %v, want infra/crds' %v", got, want)
	}
	sums := map[string]string{}
	for _, f := range crd.Files {
		sums["crds/"+f.Name] = f.SHA256
	}
	var kinds []string
	for i, c := range crds {
		src, err := os.ReadFile(infra[i])
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(c.YAML, src) {
			t.Errorf("%s differs from %s: copy infra/crds into charts/dovetail/crds again", c.Name, infra[i])
		}
		if want, ok := sums[c.Name]; ok {
			sum := sha256.Sum256(c.YAML)
			if got := hex.EncodeToString(sum[:]); got != want {
				t.Errorf("%s: SHA-256 %s, want Karpenter %s's %s", c.Name, got, crd.Release, want)
			}
		}
		var def apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(c.YAML, &def); err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		kinds = append(kinds, def.Spec.Group+"/"+def.Spec.Names.Kind)
	}
	sort.Strings(kinds)
	wantKinds := []string{"autoscaling.x-k8s.io/ProvisioningRequest", "karpenter.azure.com/AKSNodeClass", "karpenter.k8s.aws/EC2NodeClass", "karpenter.sh/NodeClaim", "karpenter.sh/NodeOverlay", "karpenter.sh/NodePool"}
	if !slices.Equal(kinds, wantKinds) {
		t.Errorf("chart CRDs define %v, want %v", kinds, wantKinds)
	}
	// Helm installs crds/ itself, never as templates: no rendered manifest is a CRD.
	ms, err := Render("dovetail", testNamespace, sqsValues)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Kind == "CustomResourceDefinition" {
			t.Errorf("%s renders CRD %s: CRDs belong in crds/ only", m.Template, m.Name)
		}
	}
}
