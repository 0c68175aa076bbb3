package manifests

import (
	"bytes"
	"encoding/json"
	"errors"
	"runtime"
	"sync"

	sigsyaml "sigs.k8s.io/yaml"
)

// A `kubectl get -o yaml` dump is one YAML document: a List whose items are a block sequence
// at column 0 ("items:" then "- apiVersion: ..." lines). Converting it whole (sigs.k8s.io/yaml
// builds the entire tree, then JSON, then the List's items are decoded) held several copies of a
// 100,000-object dump at once. splitList cuts such a document into its header and its items
// by the one rule of YAML block indentation it relies on (YAML 1.2.2 §8.2.1: the content of a
// block sequence entry at column 0 is indented, so every line at column 0 that is not a
// comment starts an entry or ends the sequence); each item is then converted on its own by the
// same strict sigs.k8s.io/yaml conversion. Anything it does not recognise (flow style, a second
// "items:", anchors and aliases, a header that is not a List) is converted whole as before, and
// so is the whole document when an item fails to convert, so errors read exactly as they did.

// yamlList is a List document cut into its header (every line outside the items) and items.
type yamlList struct {
	doc    []byte   // the whole document, for the fallback
	header []byte   // the document without its items
	items  [][]byte // each item's lines, the first with its "-" still in place
}

// splitList cuts doc into a yamlList, or returns nil when doc is not a block-style List.
func splitList(doc []byte) *yamlList {
	const key = "items:"
	if !bytes.HasPrefix(doc, []byte(key)) && !bytes.Contains(doc, []byte("\n"+key)) {
		return nil
	}
	// An alias may name an anchor of another item: such a document only means something whole.
	// (A plain scalar cannot start with * or &, so these only occur as aliases and anchors.)
	for _, a := range []string{": *", ": &", "- *", "- &", "[*", "[&", ", *", ", &"} {
		if bytes.Contains(doc, []byte(a)) {
			return nil
		}
	}
	l := &yamlList{doc: doc}
	var header bytes.Buffer
	inItems, seen := false, false
	start := -1 // start of the current item
	for off := 0; off < len(doc); {
		end := bytes.IndexByte(doc[off:], '\n')
		if end < 0 {
			end = len(doc)
		} else {
			end += off + 1
		}
		line := doc[off:end]
		trimmed := bytes.TrimRight(line, " \r\n")
		switch {
		case inItems && (len(trimmed) == 0 || line[0] == ' ' || line[0] == '\t' || line[0] == '#'):
			// inside the current item (or blank or a comment before the first)
		case inItems && (bytes.HasPrefix(line, []byte("- ")) || len(trimmed) == 1 && trimmed[0] == '-'):
			if start >= 0 {
				l.items = append(l.items, doc[start:off])
			}
			start = off
		case bytes.Equal(trimmed, []byte(key)):
			if seen {
				return nil // a key given twice: the whole conversion says so
			}
			inItems, seen = true, true
		default:
			if inItems {
				if start < 0 {
					return nil // "items:" followed by something that is not a block sequence
				}
				inItems = false
			}
			header.Write(line)
		}
		if inItems && start < 0 && len(trimmed) > 0 && line[0] == ' ' {
			return nil // an indented sequence or mapping under items: not the kubectl shape
		}
		off = end
	}
	if start >= 0 {
		l.items = append(l.items, doc[start:])
	}
	if !seen {
		return nil
	}
	l.header = header.Bytes()
	return l
}

// item returns item i as a YAML document: its "-" becomes a space, so it is the mapping (or
// whatever it is) at the indentation it had.
func (l *yamlList) item(i int) []byte {
	it := l.items[i]
	out := make([]byte, len(it))
	copy(out, it)
	out[0] = ' '
	return out
}

// decodeYAMLList decodes a List cut by splitList as decodeDocument and decodeList decode it
// whole: the header's apiVersion and kind are checked, then each item is decoded as a
// document of its own. A header that is not a List, or an item that is not valid YAML, sends
// the whole document through the whole conversion, so its result or error is the one it was.
func (s *Set) decodeYAMLList(src Source, l *yamlList) error {
	whole := func() error {
		raw, err := sigsyaml.YAMLToJSONStrict(l.doc)
		if err != nil {
			return yamlError(src, err)
		}
		raw = bytes.TrimSpace(raw)
		if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
			return nil
		}
		return s.decodeDocument(src, raw)
	}
	hraw, err := sigsyaml.YAMLToJSONStrict(l.header)
	if err != nil {
		return whole()
	}
	var h header
	if err := json.Unmarshal(hraw, &h); err != nil || h.Kind != "List" || h.APIVersion == "" {
		return whole()
	}
	done := make(chan struct{})
	defer close(done)
	for c := range l.convert(done) {
		if c.err != nil {
			return whole() // its error names the line in the document, as before
		}
		for j, raw := range c.raw {
			isrc := src
			isrc.Item = c.first + j
			if err := s.decodeDocument(isrc, raw); err != nil {
				return err
			}
		}
	}
	return nil
}

// chunkItems is how many items one conversion batch holds: enough to keep every core busy,
// few enough that the JSON waiting to be decoded stays small (about 3 KB a pod).
const chunkItems = 512

// chunk is items [first, first+len(raw)) as JSON, or the first conversion error among them.
type chunk struct {
	first int
	raw   [][]byte
	err   error
}

// convert converts the items to JSON (sigs.k8s.io/yaml's strict conversion, most of the time
// a large dump takes to read) on every core, a chunk at a time, while the caller decodes the
// previous chunk; chunks arrive in order. It stops after the first chunk with an error, or
// when done is closed (the caller stopped reading).
func (l *yamlList) convert(done <-chan struct{}) <-chan chunk {
	out := make(chan chunk, 1)
	workers := max(1, runtime.GOMAXPROCS(0))
	go func() {
		defer close(out)
		for first := 0; first < len(l.items); first += chunkItems {
			c := chunk{first: first, raw: make([][]byte, min(chunkItems, len(l.items)-first))}
			errs := make([]error, len(c.raw))
			var wg sync.WaitGroup
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for j := w; j < len(c.raw); j += workers {
						c.raw[j], errs[j] = sigsyaml.YAMLToJSONStrict(l.item(first + j))
					}
				}()
			}
			wg.Wait()
			c.err = errors.Join(errs...)
			select {
			case out <- c:
			case <-done:
				return
			}
			if c.err != nil {
				return
			}
		}
	}()
	return out
}
