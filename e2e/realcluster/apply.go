package realcluster

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
)

// FieldManager is the server-side-apply field manager of objects applied by this package.
const FieldManager = "dovetail-realcluster"

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// insecureTLS is for the health probes of kube-controller-manager and kube-scheduler only: they
// serve a self-signed certificate generated in memory at their start, on loopback.
func insecureTLS() *tls.Config { return &tls.Config{InsecureSkipVerify: true} } //nolint:gosec // loopback health probe

// ApplyFiles server-side-applies every object of the YAML files (multi-document; a directory means
// its *.yaml files in name order) with the admin credentials. CustomResourceDefinitions are
// waited for until Established, so custom resources can be created right after. Errors name the
// file and the object.
func (cp *ControlPlane) ApplyFiles(ctx context.Context, paths ...string) error {
	files, err := expandYAML(paths)
	if err != nil {
		return err
	}
	dc, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		return err
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cp.Config)
	if err != nil {
		return err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc))
	var crds []string
	for _, f := range files {
		objs, err := readObjects(f)
		if err != nil {
			return err
		}
		for _, u := range objs {
			gvk := u.GroupVersionKind()
			m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			if err != nil {
				mapper.Reset() // a CRD applied earlier in this call may define the kind
				if m, err = mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
					return fmt.Errorf("%s: %s %s: %w", f, gvk.Kind, u.GetName(), err)
				}
			}
			var ri dynamic.ResourceInterface = dc.Resource(m.Resource)
			if m.Scope.Name() == meta.RESTScopeNameNamespace {
				ns := u.GetNamespace()
				if ns == "" {
					ns = metav1.NamespaceDefault
				}
				if err := cp.ensureNamespace(ctx, ns); err != nil {
					return fmt.Errorf("%s: namespace %s: %w", f, ns, err)
				}
				ri = dc.Resource(m.Resource).Namespace(ns)
			}
			if _, err := ri.Apply(ctx, u.GetName(), u, metav1.ApplyOptions{FieldManager: FieldManager, Force: true}); err != nil {
				return fmt.Errorf("%s: applying %s %s: %w", f, gvk.Kind, u.GetName(), err)
			}
			if m.Resource == crdGVR {
				crds = append(crds, u.GetName())
			}
		}
	}
	for _, name := range crds {
		if err := cp.poll(ctx, "CRD "+name+" Established", func(ctx context.Context) (bool, error) {
			u, err := dc.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
			for _, c := range conds {
				if m, ok := c.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
					return true, nil
				}
			}
			return false, nil
		}); err != nil {
			return err
		}
	}
	return nil
}

func (cp *ControlPlane) ensureNamespace(ctx context.Context, ns string) error {
	kc, err := cp.Clientset()
	if err != nil {
		return err
	}
	_, err = kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// ServiceAccountToken returns a token for the service account from the TokenRequest API, valid
// for ttl (the API server's minimum is 10 minutes).
func (cp *ControlPlane) ServiceAccountToken(ctx context.Context, namespace, name string, ttl time.Duration) (string, error) {
	kc, err := cp.Clientset()
	if err != nil {
		return "", err
	}
	secs := int64(ttl / time.Second)
	tr, err := kc.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &secs}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token for service account %s/%s: %w", namespace, name, err)
	}
	return tr.Status.Token, nil
}

// expandYAML lists the files: a directory contributes its *.yaml and *.yml files in name order.
func expandYAML(paths []string) ([]string, error) {
	if len(paths) == 0 {
		return nil, errors.New("no manifest path given")
	}
	var out []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			out = append(out, p)
			continue
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			return nil, err
		}
		var names []string
		for _, e := range entries {
			if !e.IsDir() && (strings.HasSuffix(e.Name(), ".yaml") || strings.HasSuffix(e.Name(), ".yml")) {
				names = append(names, filepath.Join(p, e.Name()))
			}
		}
		sort.Strings(names)
		out = append(out, names...)
	}
	return out, nil
}

// readObjects decodes every non-empty document of a YAML file; each must name apiVersion, kind
// and metadata.name. Errors name the file and the document's position among the non-empty
// documents, counting from 1.
func readObjects(path string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []*unstructured.Unstructured
	i := 0
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", path, i+1, err)
		}
		obj := map[string]any{}
		if err := utilyaml.Unmarshal(doc, &obj); err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", path, i+1, err)
		}
		if len(obj) == 0 {
			continue
		}
		i++
		u := &unstructured.Unstructured{Object: obj}
		switch {
		case u.GetAPIVersion() == "":
			return nil, fmt.Errorf("%s: document %d: apiVersion: required", path, i)
		case u.GetKind() == "":
			return nil, fmt.Errorf("%s: document %d: kind: required", path, i)
		case u.GetName() == "":
			return nil, fmt.Errorf("%s: document %d: metadata.name: required", path, i)
		}
		out = append(out, u)
	}
}
