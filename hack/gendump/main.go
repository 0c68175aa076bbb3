// Command gendump writes a large `kubectl get -o yaml`-style dump (one List) for measuring
// `dovetail plan` at scale (docs/scale.md). It copies the objects of a small real cluster's dump
// (by default cmd/dovetail/testdata/liveplan/cluster.yaml: a kind cluster with Karpenter's
// NodePool "default", its EC2NodeClass, nodes, NodeClaims, pods, PDBs and a DaemonSet) and
// multiplies them: NODES nodes cloned round-robin from the template's Karpenter nodes (each with
// a clone of its NodeClaim, so the templates' expireAfter values, 720h and 1h, recur), and PODS
// pods cloned from the template's first application pod, 2,000 Deployments' worth spread over
// 50 namespaces, each requesting 50m CPU and 64Mi; the first PENDING pods are unbound and
// Unschedulable, the others bound round-robin to the nodes. The output depends only on the
// arguments and the template (no randomness), so a figure can be reproduced.
//
// Usage: go run ./hack/gendump [-template FILE] NODES PODS PENDING > dump.yaml
// (docs/scale.md: 5000 95000 200 is the 100,000-object dump.)
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"

	"sigs.k8s.io/yaml"
)

type object = map[string]any

func main() {
	template := flag.String("template", "cmd/dovetail/testdata/liveplan/cluster.yaml", "the dump whose objects are cloned")
	flag.Parse()
	if flag.NArg() != 3 {
		fmt.Fprintln(os.Stderr, "usage: gendump [-template FILE] NODES PODS PENDING")
		os.Exit(2)
	}
	var n [3]int
	for i := range n {
		v, err := strconv.Atoi(flag.Arg(i))
		if err != nil || v < 0 {
			fmt.Fprintf(os.Stderr, "gendump: argument %d: %q is not a count\n", i+1, flag.Arg(i))
			os.Exit(2)
		}
		n[i] = v
	}
	w := bufio.NewWriterSize(os.Stdout, 1<<20)
	if err := generate(w, *template, n[0], n[1], n[2]); err != nil {
		fmt.Fprintln(os.Stderr, "gendump:", err)
		os.Exit(1)
	}
	if err := w.Flush(); err != nil {
		fmt.Fprintln(os.Stderr, "gendump:", err)
		os.Exit(1)
	}
}

func generate(w io.Writer, template string, nodes, pods, pending int) error {
	data, err := os.ReadFile(template)
	if err != nil {
		return err
	}
	var list struct {
		Items []object `json:"items"`
	}
	if err := yaml.Unmarshal(data, &list); err != nil {
		return fmt.Errorf("%s: %w", template, err)
	}
	var tmplNodes, others []object
	var tmplPod object
	claims := map[string]object{} // by status.nodeName
	for i, it := range list.Items {
		meta, ok := it["metadata"].(object)
		if !ok {
			return fmt.Errorf("%s: items[%d].metadata: not an object", template, i)
		}
		delete(meta, "managedFields")
		switch it["kind"] {
		case "Node":
			if _, ok := str(meta, "labels", "karpenter.sh/nodepool"); ok {
				tmplNodes = append(tmplNodes, it)
			}
		case "NodeClaim":
			if name, ok := str(it, "status", "nodeName"); ok {
				claims[name] = it
			}
		case "Pod":
			if ns, _ := str(it, "metadata", "namespace"); ns != "kube-system" && tmplPod == nil {
				tmplPod = it
			}
		default:
			others = append(others, it)
		}
	}
	if len(tmplNodes) == 0 || tmplPod == nil {
		return fmt.Errorf("%s: needs at least one Karpenter node and one pod outside kube-system", template)
	}
	if _, err := io.WriteString(w, "apiVersion: v1\nkind: List\nmetadata:\n  resourceVersion: \"\"\nitems:\n"); err != nil {
		return err
	}
	for _, o := range others {
		if err := item(w, o); err != nil {
			return err
		}
	}
	names := make([]string, nodes)
	for k := range nodes {
		t := tmplNodes[k%len(tmplNodes)]
		nd, err := clone(t)
		if err != nil {
			return err
		}
		name := fmt.Sprintf("ip-10-%d-%d-%d.ec2.internal", k/65536, (k/256)%256, k%256)
		names[k] = name
		meta, labels, spec := obj(nd, "metadata"), obj(nd, "metadata", "labels"), obj(nd, "spec")
		pid, _ := str(nd, "spec", "providerID")
		tname, _ := str(t, "metadata", "name")
		if meta == nil || labels == nil || spec == nil || len(pid) < 8 {
			return fmt.Errorf("%s: node %s: want metadata.labels and a spec.providerID", template, tname)
		}
		meta["name"], meta["uid"] = name, fmt.Sprintf("node-%d", k)
		labels["kubernetes.io/hostname"] = name
		pid = pid[:len(pid)-8] + fmt.Sprintf("%08x", k)
		spec["providerID"] = pid
		if err := item(w, nd); err != nil {
			return err
		}
		if c, ok := claims[tname]; ok {
			if c, err = clone(c); err != nil {
				return err
			}
			cm, st := obj(c, "metadata"), obj(c, "status")
			if cm == nil || st == nil {
				return fmt.Errorf("%s: the NodeClaim of node %s: want metadata and status", template, tname)
			}
			cm["name"], cm["uid"] = fmt.Sprintf("default-%05d", k), fmt.Sprintf("claim-%d", k)
			st["nodeName"], st["providerID"] = name, pid
			if err := item(w, c); err != nil {
				return err
			}
		}
	}
	for k := range pods {
		p, err := clone(tmplPod)
		if err != nil {
			return err
		}
		dep := k % 2000
		meta, spec := obj(p, "metadata"), obj(p, "spec")
		containers, _ := spec["containers"].([]any)
		if meta == nil || spec == nil || len(containers) == 0 {
			return fmt.Errorf("%s: the template pod: want metadata and spec.containers", template)
		}
		c0, ok := containers[0].(object)
		if !ok {
			return fmt.Errorf("%s: the template pod: spec.containers[0]: not an object", template)
		}
		meta["name"], meta["uid"] = fmt.Sprintf("app-%d-%d", dep, k), fmt.Sprintf("pod-%d", k)
		meta["labels"] = object{"app": fmt.Sprintf("app-%d", dep)}
		meta["namespace"] = fmt.Sprintf("ns-%d", dep%50)
		if refs, ok := meta["ownerReferences"].([]any); ok && len(refs) > 0 {
			if ref, ok := refs[0].(object); ok {
				ref["name"] = fmt.Sprintf("app-%d-rs", dep)
			}
		}
		c0["resources"] = object{"requests": object{"cpu": "50m", "memory": "64Mi"}}
		if k < pending {
			delete(spec, "nodeName")
			p["status"] = object{"phase": "Pending", "conditions": []any{object{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}}}
		} else if nodes > 0 {
			spec["nodeName"] = names[k%nodes]
		}
		if err := item(w, p); err != nil {
			return err
		}
	}
	return nil
}

// item writes one List item: the object's YAML indented under "- ".
func item(w io.Writer, o object) error {
	b, err := yaml.Marshal(o)
	if err != nil {
		return err
	}
	lines := bytes.SplitAfter(bytes.TrimRight(b, "\n"), []byte("\n"))
	for i, l := range lines {
		prefix := "  "
		if i == 0 {
			prefix = "- "
		}
		if _, err := io.WriteString(w, prefix); err != nil {
			return err
		}
		if _, err := w.Write(l); err != nil {
			return err
		}
	}
	_, err = io.WriteString(w, "\n")
	return err
}

// clone deep-copies a decoded object by a round trip through YAML's JSON form.
func clone(o object) (object, error) {
	b, err := yaml.Marshal(o)
	if err != nil {
		return nil, err
	}
	var out object
	err = yaml.Unmarshal(b, &out)
	return out, err
}

// obj reads a nested object field, nil when it is missing or not an object.
func obj(o object, path ...string) object {
	cur := o
	for _, p := range path {
		next, ok := cur[p].(object)
		if !ok {
			return nil
		}
		cur = next
	}
	return cur
}

// str reads a nested string field.
func str(o object, path ...string) (string, bool) {
	var cur any = o
	for _, p := range path {
		m, ok := cur.(object)
		if !ok {
			return "", false
		}
		cur = m[p]
	}
	s, ok := cur.(string)
	return s, ok
}
