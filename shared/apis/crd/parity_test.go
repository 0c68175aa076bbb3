package crd

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	v1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

const crdDir = "../../../infra/crds"

var goTypes = map[string]reflect.Type{
	"NodePool": reflect.TypeOf(v1.NodePool{}), "NodeClaim": reflect.TypeOf(v1.NodeClaim{}), "EC2NodeClass": reflect.TypeOf(v1.EC2NodeClass{}),
	"NodeOverlay": reflect.TypeOf(v1.NodeOverlay{}),
}

// refused are the upstream fields Dovetail decodes but does not act on yet: setting one makes
// the object's ValidationSucceeded condition False with a message naming the field (and the
// solver refuses its NodePools with the same words), so nothing is silently ignored. Each entry
// is the JSON path and an object that sets it; the test checks the message.
var refused = map[string]func() (kind string, msgs []string){
	"EC2NodeClass spec.networkInterfaces": func() (string, []string) {
		nc := validClass()
		nc.Spec.NetworkInterfaces = []v1.NetworkInterface{{InterfaceType: "interface"}}
		return "EC2NodeClass", v1.UnsupportedEC2NodeClassFields(nc)
	},
	"EC2NodeClass spec.connectionTracking": func() (string, []string) {
		nc := validClass()
		t := int32(60)
		nc.Spec.ConnectionTracking = &v1.ConnectionTracking{UDPTimeout: &t}
		return "EC2NodeClass", v1.UnsupportedEC2NodeClassFields(nc)
	},
	"EC2NodeClass spec.cpuOptions.nestedVirtualization": func() (string, []string) {
		nc := validClass()
		e := "enabled"
		nc.Spec.CPUOptions = &v1.CPUOptions{NestedVirtualization: &e}
		return "EC2NodeClass", v1.UnsupportedEC2NodeClassFields(nc)
	},
}

// notWritten are upstream status fields Dovetail never writes, and why.
var notWritten = map[string]string{}

// ahead are Go fields the targeted release's schema does not have (the API server prunes them
// when they are written to a cluster with those CRDs): accepted from manifests for newer
// Karpenter releases, or kept because the template shares the NodeClaim's type.
var ahead = map[string]string{
	"NodePool spec.disruption.consolidateWhen":        "newer Karpenter disruption setting, read from manifests only",
	"NodePool spec.disruption.decisionRatioThreshold": "newer Karpenter disruption setting, read from manifests only",
	"NodePool spec.template.spec.resources":           "the template shares NodeClaimSpec; refused in a NodePool by validation",
	"EC2NodeClass spec.enclaveOptions":                "newer Karpenter launch setting (Nitro Enclaves), read from manifests only",
	"EC2NodeClass spec.subnetSelectorTerms[].cidr":    "newer Karpenter selector, read from manifests only",
}

func validClass() *v1.EC2NodeClass {
	return &v1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: v1.EC2NodeClassSpec{Role: "r",
		AMISelectorTerms: []v1.AMISelectorTerm{{Alias: "al2023@latest"}}}}
}

func schemaRoot(t *testing.T, f File) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(crdDir, f.Name))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	versions := doc["spec"].(map[string]any)["versions"].([]any)
	v := versions[0].(map[string]any)
	if v["name"] != f.Version || v["served"] != true || v["storage"] != true || len(versions) != 1 {
		t.Errorf("%s: want exactly %s served and stored", f.Name, f.Version)
	}
	return v["schema"].(map[string]any)["openAPIV3Schema"].(map[string]any)
}

// schemaPaths lists every property path of an OpenAPI schema ("spec.template.spec.taints[].key").
func schemaPaths(node map[string]any, path string, out map[string]bool) {
	if props, ok := node["properties"].(map[string]any); ok {
		for k, v := range props {
			p := strings.TrimPrefix(path+"."+k, ".")
			out[p] = true
			schemaPaths(v.(map[string]any), p, out)
		}
	}
	if items, ok := node["items"].(map[string]any); ok {
		schemaPaths(items, path+"[]", out)
	}
	if ap, ok := node["additionalProperties"].(map[string]any); ok {
		schemaPaths(ap, path+"{}", out)
	}
}

// goLeaves are types the schema treats as scalars or whose fields belong to Kubernetes itself.
var goLeaves = map[reflect.Type]bool{
	reflect.TypeOf(metav1.ObjectMeta{}): true, reflect.TypeOf(metav1.Time{}): true, reflect.TypeOf(metav1.Duration{}): true,
	reflect.TypeOf(v1.NillableDuration{}): true,
}

// goPaths lists every JSON field path of a Go type, as schemaPaths does for the schema.
func goPaths(ty reflect.Type, path string, out map[string]bool) {
	for ty.Kind() == reflect.Pointer {
		ty = ty.Elem()
	}
	if goLeaves[ty] || ty.Name() == "Quantity" {
		return
	}
	switch ty.Kind() {
	case reflect.Slice:
		goPaths(ty.Elem(), path+"[]", out)
		return
	case reflect.Map:
		goPaths(ty.Elem(), path+"{}", out)
		return
	case reflect.Struct:
	default:
		return
	}
	for i := 0; i < ty.NumField(); i++ {
		f := ty.Field(i)
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		if tag == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		if f.Anonymous && name == "" {
			goPaths(f.Type, path, out)
			continue
		}
		p := strings.TrimPrefix(path+"."+name, ".")
		out[p] = true
		goPaths(f.Type, p, out)
	}
}

func under(p string, prefixes ...string) bool {
	for _, x := range prefixes {
		if p == x || strings.HasPrefix(p, x+".") || strings.HasPrefix(p, x+"[]") {
			return true
		}
	}
	return false
}

// The copies in infra/crds are the release's files, byte for byte.
func TestCRDsAreTheReleasedFiles(t *testing.T) {
	for _, f := range Files {
		b, err := os.ReadFile(filepath.Join(crdDir, f.Name))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		if got := hex.EncodeToString(sum[:]); got != f.SHA256 {
			t.Errorf("%s: sha256 %s, want %s (karpenter-provider-aws %s as released)", f.Name, got, f.SHA256, Release)
		}
	}
}

// Parity: every field of Karpenter's schemas is a field of Dovetail's types (implemented, or
// refused by a condition that names it, or a status field Dovetail knowingly does not write),
// and every Go field is one of the schema's or listed in ahead with why.
func TestParityWithKarpentersSchemas(t *testing.T) {
	used := map[string]bool{}
	for _, f := range Files {
		up, gp := map[string]bool{}, map[string]bool{}
		schemaPaths(schemaRoot(t, f), "", up)
		goPaths(goTypes[f.Kind], "", gp)
		if len(up) < 15 { // NodeOverlay's is the smallest: 20
			t.Errorf("%s: only %d schema fields read", f.Name, len(up))
		}
		// NodePool template metadata is Dovetail's own {labels, annotations} type.
		if f.Kind == "NodePool" {
			gp["spec.template.metadata.labels"], gp["spec.template.metadata.annotations"] = true, true
		}
		for p := range up {
			if under(p, "metadata", "apiVersion", "kind") || gp[p] {
				continue
			}
			key := f.Kind + " " + p
			if why, ok := notWritten[key]; ok {
				used[key] = true
				t.Logf("%s: not written (%s)", key, why)
				continue
			}
			t.Errorf("%s: field %s of Karpenter %s's schema is not a field of Dovetail's %s: implement it or refuse it by condition", f.Name, p, Release, f.Kind)
		}
		for p := range gp {
			if under(p, "metadata") || up[p] {
				continue
			}
			key := f.Kind + " " + p
			covered := false
			for a := range ahead {
				if key == a || strings.HasPrefix(key, a+".") {
					covered, used[a] = true, true
				}
			}
			if !covered {
				t.Errorf("%s: Go field %s is not in Karpenter %s's schema and not listed as ahead of it", f.Name, p, Release)
			}
		}
	}
	for k := range ahead {
		if !used[k] {
			t.Errorf("ahead lists %s, which is no longer a Dovetail-only field", k)
		}
	}
	// Every refused field is refused with its path in the message.
	keys := make([]string, 0, len(refused))
	for k := range refused {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		_, msgs := refused[k]()
		path := strings.SplitN(k, " ", 2)[1]
		found := false
		for _, m := range msgs {
			found = found || strings.HasPrefix(m, path)
		}
		if !found {
			t.Errorf("%s: refusal messages %q do not name the field", k, msgs)
		}
		t.Logf("refused by ValidationSucceeded=False: %s — %s", k, strings.Join(msgs, "; "))
	}
}
