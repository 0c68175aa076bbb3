package crd

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	v1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// provisioningRequestFile is Cluster Autoscaler's ProvisioningRequest CRD as Dovetail ships it:
// the v1 schema of kubernetes/autoscaler's
// cluster-autoscaler/apis/config/crd/autoscaling.x-k8s.io_provisioningrequests.yaml with
// Dovetail's own descriptions (so no checksum: the facts below are what must not drift).
var provisioningRequestFile = File{"autoscaling.x-k8s.io_provisioningrequests.yaml", "autoscaling.x-k8s.io", "ProvisioningRequest", "", "v1"}

// The schema facts of Cluster Autoscaler's CRD, written down from its types.go markers, and the
// Go type's fields: the same paths both ways.
func TestProvisioningRequestCRD(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(crdDir, provisioningRequestFile.Name))
	if err != nil {
		t.Fatal(err)
	}
	var def apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(b, &def); err != nil {
		t.Fatal(err)
	}
	if def.Name != "provisioningrequests.autoscaling.x-k8s.io" || def.Spec.Scope != apiextensionsv1.NamespaceScoped ||
		def.Spec.Names.Kind != "ProvisioningRequest" || !slices.Equal(def.Spec.Names.ShortNames, []string{"provreq", "provreqs"}) {
		t.Errorf("names/scope: %s %s %+v", def.Name, def.Spec.Scope, def.Spec.Names)
	}
	v := def.Spec.Versions[0]
	if v.Subresources == nil || v.Subresources.Status == nil {
		t.Error("the status subresource is missing: the agent writes conditions through /status")
	}
	root := v.Schema.OpenAPIV3Schema
	spec := root.Properties["spec"]
	podSets := spec.Properties["podSets"]
	if *podSets.MinItems != 1 || *podSets.MaxItems != 32 || !slices.Equal(spec.Required, []string{"podSets", "provisioningClassName"}) {
		t.Errorf("spec.podSets: minItems %d maxItems %d, required %v; want 1, 32, [podSets provisioningClassName]", *podSets.MinItems, *podSets.MaxItems, spec.Required)
	}
	if c := podSets.Items.Schema.Properties["count"]; *c.Minimum != 1 || c.Format != "int32" {
		t.Errorf("spec.podSets[].count: minimum %v format %s; want 1, int32", *c.Minimum, c.Format)
	}
	if p := spec.Properties["parameters"]; *p.MaxProperties != 100 || *p.AdditionalProperties.Schema.MaxLength != 255 {
		t.Errorf("spec.parameters: maxProperties %d, value maxLength %d; want 100, 255", *p.MaxProperties, *p.AdditionalProperties.Schema.MaxLength)
	}
	for _, f := range []string{"podSets", "parameters", "provisioningClassName"} {
		if x := spec.Properties[f].XValidations; len(x) != 1 || x[0].Rule != "self == oldSelf" {
			t.Errorf("spec.%s: validations %v, want the immutability rule", f, x)
		}
	}
	if d := root.Properties["status"].Properties["provisioningClassDetails"]; *d.MaxProperties != 64 || *d.AdditionalProperties.Schema.MaxLength != 32768 {
		t.Errorf("status.provisioningClassDetails: %d, %d; want 64, 32768", *d.MaxProperties, *d.AdditionalProperties.Schema.MaxLength)
	}
	conds := root.Properties["status"].Properties["conditions"]
	if conds.XListType == nil || *conds.XListType != "map" || !slices.Equal(conds.XListMapKeys, []string{"type"}) {
		t.Error("status.conditions must be a list map keyed by type")
	}

	up, gp := map[string]bool{}, map[string]bool{}
	schemaPaths(schemaRoot(t, provisioningRequestFile), "", up)
	goPaths(reflect.TypeOf(v1.ProvisioningRequest{}), "", gp)
	var missing, extra []string
	for p := range up {
		if !under(p, "metadata", "apiVersion", "kind") && !under(p, "status.conditions") && !gp[p] {
			missing = append(missing, p)
		}
	}
	for p := range gp {
		if !under(p, "status.conditions") && !up[p] {
			extra = append(extra, p)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	if len(missing)+len(extra) > 0 {
		t.Errorf("schema fields without a Go field: %v; Go fields without a schema field: %v", missing, extra)
	}
}
