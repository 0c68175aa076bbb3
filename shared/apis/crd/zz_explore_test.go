package crd

import (
	"os"
	"reflect"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	v1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

func upstreamPaths(node map[string]any, path string, out map[string]bool) {
	if props, ok := node["properties"].(map[string]any); ok {
		for k, v := range props {
			p := strings.TrimPrefix(path+"."+k, ".")
			out[p] = true
			upstreamPaths(v.(map[string]any), p, out)
		}
	}
	if items, ok := node["items"].(map[string]any); ok {
		upstreamPaths(items, path+"[]", out)
	}
	if ap, ok := node["additionalProperties"].(map[string]any); ok {
		upstreamPaths(ap, path+"{}", out)
	}
}

func goPaths(ty reflect.Type, path string, out map[string]bool) {
	for ty.Kind() == reflect.Pointer {
		ty = ty.Elem()
	}
	if leaves[ty.Name()] {
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

func TestExploreParity(t *testing.T) {
	dir := "/root/go/pkg/mod/github.com/aws/karpenter-provider-aws@v1.14.0/pkg/apis/crds/"
	for file, ty := range map[string]reflect.Type{"karpenter.sh_nodepools.yaml": reflect.TypeOf(v1.NodePool{}),
		"karpenter.sh_nodeclaims.yaml": reflect.TypeOf(v1.NodeClaim{}), "karpenter.k8s.aws_ec2nodeclasses.yaml": reflect.TypeOf(v1.EC2NodeClass{})} {
		b, _ := os.ReadFile(dir + file)
		var doc map[string]any
		_ = yaml.Unmarshal(b, &doc)
		root := doc["spec"].(map[string]any)["versions"].([]any)[0].(map[string]any)["schema"].(map[string]any)["openAPIV3Schema"].(map[string]any)
		up, gp := map[string]bool{}, map[string]bool{}
		upstreamPaths(root, "", up)
		goPaths(ty, "", gp)
		var missing, extra []string
		for p := range up {
			if !gp[p] && !strings.HasPrefix(p, "metadata") && p != "apiVersion" && p != "kind" {
				missing = append(missing, p)
			}
		}
		for p := range gp {
			if !up[p] && !strings.HasPrefix(p, "metadata") {
				extra = append(extra, p)
			}
		}
		sort.Strings(missing)
		sort.Strings(extra)
		t.Logf("%s: upstream-only %v\n   dovetail-only %v", file, missing, extra)
	}
}
