// Package charts holds Dovetail's Helm chart (charts/dovetail, embedded) and renders it with
// Helm's own packages (helm.sh/helm/v3: the chart loader, values coalescing and schema validation,
// the template engine, the install order), so what the tests and the e2e suite check is what
// `helm template` and `helm install` produce.
package charts

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"
)

// Dir is the chart's directory under charts/ (what `helm lint charts/dovetail` reads).
const Dir = "dovetail"

// KubeVersion is the Kubernetes version the chart is rendered for: the e2e suite's control plane
// (e2e/controlplane, v1.34.2).
var KubeVersion = chartutil.KubeVersion{Version: "v1.34.2", Major: "1", Minor: "34"}

//go:embed all:dovetail
var files embed.FS

// Load returns the embedded chart.
func Load() (*chart.Chart, error) {
	var bufs []*loader.BufferedFile
	err := fs.WalkDir(files, Dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := files.ReadFile(p)
		if err != nil {
			return err
		}
		bufs = append(bufs, &loader.BufferedFile{Name: strings.TrimPrefix(p, Dir+"/"), Data: b})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return loader.LoadFiles(bufs)
}

// CRD is one file of the chart's crds/ folder: Karpenter's CustomResourceDefinitions (NodePool,
// NodeClaim, NodeOverlay, EC2NodeClass, AKSNodeClass), copies of infra/crds kept byte-identical by a test.
type CRD struct {
	// Name is the file's path in the chart (crds/<file>.yaml); YAML its content, unchanged.
	Name string
	YAML []byte
}

// CRDs returns the chart's crds/ files in name order, as Helm's loader reads them
// (chart.CRDObjects). `helm install` creates each before rendering any template, skips one whose
// CustomResourceDefinition already exists, and never upgrades or deletes them (Helm's "Custom
// Resource Definitions" best practice; Karpenter's chart ships its CRDs the same way).
func CRDs() ([]CRD, error) {
	c, err := Load()
	if err != nil {
		return nil, err
	}
	var out []CRD
	for _, o := range c.CRDObjects() {
		out = append(out, CRD{Name: o.Name, YAML: o.File.Data})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Manifest is one rendered object: the template it came from, its kind and name, and its YAML.
type Manifest struct {
	Template, Kind, Name string
	YAML                 string
}

// Render renders the chart as `helm template <release> charts/dovetail --namespace <namespace>`
// with values given by -f: values are coalesced with values.yaml and checked against
// values.schema.json (an error names each failing field), the templates' own checks (fail) run,
// and the manifests come back in Helm's install order (ServiceAccounts and RBAC before workloads).
// NOTES.txt and partials are not manifests, and the crds/ files are not among them (as with
// `helm template` without --include-crds): CRDs returns those.
func Render(release, namespace string, values map[string]any) ([]Manifest, error) {
	c, err := Load()
	if err != nil {
		return nil, err
	}
	if !chartutil.IsCompatibleRange(c.Metadata.KubeVersion, KubeVersion.Version) {
		return nil, fmt.Errorf("chart needs Kubernetes %s, rendering for %s", c.Metadata.KubeVersion, KubeVersion.Version)
	}
	caps := chartutil.DefaultCapabilities.Copy()
	caps.KubeVersion = KubeVersion
	vals, err := chartutil.ToRenderValues(c, values, chartutil.ReleaseOptions{Name: release, Namespace: namespace,
		Revision: 1, IsInstall: true}, caps)
	if err != nil {
		return nil, err
	}
	out, err := engine.Render(c, vals)
	if err != nil {
		return nil, err
	}
	docs := map[string]string{}
	for name, text := range out {
		if path.Ext(name) != ".yaml" || strings.TrimSpace(text) == "" {
			continue
		}
		docs[name] = text
	}
	hooks, sorted, err := releaseutil.SortManifests(docs, caps.APIVersions, releaseutil.InstallOrder)
	if err != nil {
		return nil, err
	}
	if len(hooks) > 0 {
		return nil, fmt.Errorf("the chart has %d hooks; Render applies none", len(hooks))
	}
	var ms []Manifest
	for _, m := range sorted {
		if m.Head == nil || m.Head.Kind == "" {
			continue
		}
		name := ""
		if m.Head.Metadata != nil {
			name = m.Head.Metadata.Name
		}
		ms = append(ms, Manifest{Template: m.Name, Kind: m.Head.Kind, Name: name, YAML: m.Content})
	}
	return ms, nil
}
