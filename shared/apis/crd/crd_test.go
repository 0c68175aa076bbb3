package crd

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite infra/crds from the Go types")

const crdDir = "../../../infra/crds"

// The committed CRD YAML is exactly what the Go types generate.
func TestCRDFiles(t *testing.T) {
	for _, d := range Definitions() {
		want, err := Render(d)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(crdDir, d.File)
		if *update {
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run: go test ./shared/apis/crd -run TestCRDFiles -update)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale; run: go test ./shared/apis/crd -run TestCRDFiles -update", path)
		}
	}
}

// Every JSON field of the Go structs appears in the committed CRD schema. This walk reads the
// YAML file and the struct tags directly (not the generator), so hand edits or a generator bug
// that drops a field are caught.
func TestEveryGoFieldInCRD(t *testing.T) {
	for _, d := range Definitions() {
		b, err := os.ReadFile(filepath.Join(crdDir, d.File))
		if err != nil {
			t.Fatal(err)
		}
		var doc map[string]any
		if err := yaml.Unmarshal(b, &doc); err != nil {
			t.Fatal(err)
		}
		versions := doc["spec"].(map[string]any)["versions"].([]any)
		v := versions[0].(map[string]any)
		if v["name"] != "v1" || v["served"] != true || v["storage"] != true || len(versions) != 1 {
			t.Errorf("%s: want exactly v1 served and stored", d.File)
		}
		if _, ok := v["subresources"].(map[string]any)["status"]; !ok {
			t.Errorf("%s: no status subresource", d.File)
		}
		root := v["schema"].(map[string]any)["openAPIV3Schema"].(map[string]any)
		n := checkFields(t, d.File, d.Type, root, "")
		if n < 20 {
			t.Errorf("%s: only %d fields checked", d.File, n)
		}
	}
}

// leaves are types whose JSON is a scalar or free-form object in the schema.
var leaves = map[string]bool{"Quantity": true, "NillableDuration": true, "Duration": true, "Time": true, "ObjectMeta": true}

func checkFields(t *testing.T, file string, ty reflect.Type, node map[string]any, path string) int {
	for ty.Kind() == reflect.Pointer {
		ty = ty.Elem()
	}
	if leaves[ty.Name()] {
		return 0
	}
	switch ty.Kind() {
	case reflect.Slice:
		items, ok := node["items"].(map[string]any)
		if !ok {
			t.Errorf("%s: %s has no items", file, path)
			return 0
		}
		return checkFields(t, file, ty.Elem(), items, path+"[]")
	case reflect.Map:
		ap, ok := node["additionalProperties"].(map[string]any)
		if !ok {
			t.Errorf("%s: %s has no additionalProperties", file, path)
			return 0
		}
		return checkFields(t, file, ty.Elem(), ap, path+"{}")
	case reflect.Struct:
	default:
		return 0
	}
	props, _ := node["properties"].(map[string]any)
	count := 0
	for i := 0; i < ty.NumField(); i++ {
		f := ty.Field(i)
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		if tag == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		if f.Anonymous && name == "" {
			count += checkFields(t, file, f.Type, node, path)
			continue
		}
		p := strings.TrimPrefix(path+"."+name, ".")
		child, ok := props[name].(map[string]any)
		if !ok {
			t.Errorf("%s: Go field %s (%s.%s) is missing from the CRD schema", file, p, ty.Name(), f.Name)
			continue
		}
		count += 1 + checkFields(t, file, f.Type, child, p)
	}
	return count
}
