package manifests

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	sigsyaml "sigs.k8s.io/yaml"
)

// manifestExts are the file name endings read when walking a directory.
var manifestExts = []string{".yaml", ".yml", ".json"}

// Stdin is the path that names standard input ("-f -", as kubectl reads it); StdinName is
// how its documents are located in warnings and errors.
const (
	Stdin     = "-"
	StdinName = "<stdin>"
)

// Load reads manifests from files and directories. A directory is walked recursively and every
// *.yaml, *.yml and *.json file in it is read, in lexical path order (filepath.WalkDir order);
// a file named explicitly is read whatever its extension; "-" reads standard input (a `kubectl
// get ... -o yaml` piped in). Paths are read in the order given.
// Errors: a missing path, an unreadable file, "-" given twice, or a malformed document (*Error).
func Load(paths ...string) (*Set, error) { return LoadFrom(os.Stdin, paths...) }

// LoadFrom is Load with stdin as what "-" reads.
func LoadFrom(stdin io.Reader, paths ...string) (*Set, error) { return LoadAll(stdin, nil, paths...) }

// Stream is a named stream of manifests (a cluster's state listed through its API).
type Stream struct {
	Name string
	R    io.Reader
}

// LoadAll reads the streams, then the paths as LoadFrom does, into one Set.
func LoadAll(stdin io.Reader, streams []Stream, paths ...string) (*Set, error) {
	return LoadAllWith(LoadOptions{}, stdin, streams, paths...)
}

// LoadOptions tune LoadAllWith.
type LoadOptions struct {
	// Progress, when set, is called with the number of documents and List items decoded so
	// far, every ProgressEvery of them (a 100,000-object dump takes seconds to read).
	Progress func(objects int)
}

// ProgressEvery is how many objects LoadOptions.Progress waits between calls.
const ProgressEvery = 1000

// LoadAllWith is LoadAll with options.
func LoadAllWith(o LoadOptions, stdin io.Reader, streams []Stream, paths ...string) (*Set, error) {
	s := &Set{progress: o.Progress}
	for _, st := range streams {
		if err := s.read(st.Name, st.R); err != nil {
			return nil, err
		}
	}
	readStdin := false
	for _, p := range paths {
		if p == Stdin {
			if readStdin {
				return nil, fmt.Errorf("manifests: standard input (-) is given twice")
			}
			readStdin = true
			if err := s.read(StdinName, stdin); err != nil {
				return nil, err
			}
			continue
		}
		files, err := listFiles(p, func(root string, fn fs.WalkDirFunc) error { return filepath.WalkDir(root, fn) }, os.Stat)
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			if err := loadFile(s, f, func() (io.ReadCloser, error) { return os.Open(f) }); err != nil {
				return nil, err
			}
		}
	}
	s.summarise()
	return s, nil
}

// LoadFS is Load over a file system (for example manifests embedded with go:embed); paths use
// forward slashes as io/fs requires, "." being the root.
func LoadFS(fsys fs.FS, paths ...string) (*Set, error) {
	s := &Set{}
	for _, p := range paths {
		files, err := listFiles(p,
			func(root string, fn fs.WalkDirFunc) error { return fs.WalkDir(fsys, root, fn) },
			func(name string) (fs.FileInfo, error) { return fs.Stat(fsys, name) })
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			if err := loadFile(s, f, func() (io.ReadCloser, error) { return fsys.Open(f) }); err != nil {
				return nil, err
			}
		}
	}
	s.summarise()
	return s, nil
}

// LoadReader reads one stream of manifests; name is used in warnings and errors.
func LoadReader(name string, r io.Reader) (*Set, error) {
	s := &Set{}
	if err := s.read(name, r); err != nil {
		return nil, err
	}
	s.summarise()
	return s, nil
}

func listFiles(p string, walk func(string, fs.WalkDirFunc) error, stat func(string) (fs.FileInfo, error)) ([]string, error) {
	info, err := stat(p)
	if err != nil {
		return nil, fmt.Errorf("manifests: %w", err)
	}
	if !info.IsDir() {
		return []string{p}, nil
	}
	var files []string
	err = walk(p, func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		ext := strings.ToLower(path.Ext(filepath.ToSlash(name)))
		for _, e := range manifestExts {
			if ext == e {
				files = append(files, name)
				break
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("manifests: walking %s: %w", p, err)
	}
	sort.Strings(files) // WalkDir is already lexical; sorting keeps the promise explicit.
	return files, nil
}

func loadFile(s *Set, name string, open func() (io.ReadCloser, error)) error {
	f, err := open()
	if err != nil {
		return fmt.Errorf("manifests: %w", err)
	}
	defer f.Close()
	if data, ok, err := readRegular(f); err != nil {
		return fmt.Errorf("manifests: %s: %w", name, err)
	} else if ok {
		return s.readBytes(name, data)
	}
	return s.read(name, f)
}

// readRegular reads a regular file whole into a buffer of its size (plus a final newline when
// it lacks one), as YAMLReader's line-by-line buffer (grown by doubling, a copy per document)
// would hold it several times over; ok is false for anything else (a pipe, an embedded file)
// and for text with carriage returns, which YAMLReader's line reader rewrites.
func readRegular(f io.Reader) (data []byte, ok bool, err error) {
	file, isFile := f.(*os.File)
	if !isFile {
		return nil, false, nil
	}
	info, err := file.Stat()
	if err != nil || !info.Mode().IsRegular() || info.Size() > math.MaxInt32 {
		return nil, false, nil
	}
	data = make([]byte, info.Size(), info.Size()+1)
	if _, err := io.ReadFull(file, data); err != nil {
		return nil, false, err
	}
	if bytes.IndexByte(data, '\r') >= 0 {
		if _, err := file.Seek(0, io.SeekStart); err != nil {
			return nil, false, err
		}
		return nil, false, nil
	}
	if len(data) > 0 && data[len(data)-1] != '\n' {
		data = append(data, '\n')
	}
	return data, true, nil
}

// readBytes is read over a file held whole: the same documents, as slices of data.
func (s *Set) readBytes(name string, data []byte) error {
	data = bytes.TrimLeft(data, " \t\r\n\v\f")
	if len(data) > 0 && (data[0] == '{' || data[0] == '[') {
		return s.readDocs(name, jsonDocs(bytes.NewReader(data)))
	}
	return s.readDocs(name, yamlDocsIn(data))
}

// read splits a stream into documents and decodes each: a JSON stream with apimachinery's
// YAML-or-JSON decoder, multi-document YAML with its YAML reader and sigs.k8s.io/yaml's strict
// conversion, which refuses a key given twice (YAML parsers otherwise keep the last one, so a
// missing "---" silently dropped the first of two Deployments).
func (s *Set) read(name string, r io.Reader) error {
	br := bufio.NewReader(r)
	for { // the first character that is not white space says JSON or YAML
		b, err := br.Peek(1)
		if err != nil || len(bytes.TrimSpace(b)) != 0 {
			break
		}
		_, _ = br.ReadByte()
	}
	next := yamlDocs(br)
	if b, err := br.Peek(1); err == nil && (b[0] == '{' || b[0] == '[') {
		next = jsonDocs(br)
	}
	return s.readDocs(name, next)
}

// readDocs decodes the documents next returns.
func (s *Set) readDocs(name string, next func() (document, error)) error {
	for doc := 0; ; doc++ {
		d, err := next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		src := Source{File: name, Doc: doc, Item: -1}
		if err != nil {
			return yamlError(src, err)
		}
		if d.list != nil {
			if err := s.decodeYAMLList(src, d.list); err != nil {
				return err
			}
			continue
		}
		raw := bytes.TrimSpace(d.raw)
		if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
			continue // empty document (only comments or a bare ---)
		}
		if err := s.decodeDocument(src, raw); err != nil {
			return err
		}
	}
}

// yamlError is the error for a document that is not valid YAML or JSON.
func yamlError(src Source, err error) error {
	msg := strings.Join(strings.Fields(err.Error()), " ") // the YAML errors come one per line
	if strings.Contains(msg, "already set in map") {
		return &Error{Source: src, Reason: "a key is given twice (a missing \"---\" between two objects?): " + msg}
	}
	return &Error{Source: src, Reason: "not valid YAML or JSON: " + msg}
}

// document is one document of a stream: raw, as JSON; or, for a `kind: List` in block YAML
// (what `kubectl get -o yaml` prints), list: its items still as YAML, converted one by one.
type document struct {
	raw  []byte
	list *yamlList
}

// jsonDocs returns the JSON values of a stream one by one (io.EOF at the end).
func jsonDocs(r io.Reader) func() (document, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(r, 4096)
	return func() (document, error) {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		return document{raw: raw}, err
	}
}

// yamlDocsIn is yamlDocs over text held whole (ending in a newline, without carriage
// returns): documents are cut where utilyaml.YAMLReader cuts them (a line starting with "---"
// ends a document that has lines; a first line "---" belongs to its document; anything but
// spaces and a comment after "---" is an error) and are slices of data, not copies.
func yamlDocsIn(data []byte) func() (document, error) {
	off := 0
	return func() (document, error) {
		start := -1
		for off < len(data) {
			end := bytes.IndexByte(data[off:], '\n') + off + 1
			line := data[off:end]
			if bytes.HasPrefix(line, []byte("---")) {
				if rest := bytes.TrimSpace(line[3:]); len(rest) > 0 && rest[0] != '#' {
					return document{}, fmt.Errorf("invalid Yaml document separator: %s", rest)
				}
				if start >= 0 {
					doc := data[start:off]
					off = end
					return convertYAML(doc)
				}
			}
			if start < 0 {
				start = off
			}
			off = end
		}
		if start >= 0 {
			return convertYAML(data[start:])
		}
		return document{}, io.EOF
	}
}

// convertYAML is one YAML document as yamlDocs returns it.
func convertYAML(doc []byte) (document, error) {
	if l := splitList(doc); l != nil {
		return document{list: l}, nil
	}
	raw, err := sigsyaml.YAMLToJSONStrict(doc)
	return document{raw: raw}, err
}

// yamlDocs returns the documents of a YAML stream one by one as JSON, refusing duplicate keys.
// A `kind: List` document in block style comes back as its items (splitList), so a 300 MB
// dump is never held as one YAML tree.
func yamlDocs(r *bufio.Reader) func() (document, error) {
	yr := utilyaml.NewYAMLReader(r)
	return func() (document, error) {
		doc, err := yr.Read()
		if err != nil {
			return document{}, err
		}
		return convertYAML(doc)
	}
}
