package manifests

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// manifestExts are the file name endings read when walking a directory.
var manifestExts = []string{".yaml", ".yml", ".json"}

// Load reads manifests from files and directories. A directory is walked recursively and every
// *.yaml, *.yml and *.json file in it is read, in lexical path order (filepath.WalkDir order);
// a file named explicitly is read whatever its extension. Paths are read in the order given.
// Errors: a missing path, an unreadable file, or a malformed document (*Error).
func Load(paths ...string) (*Set, error) {
	s := &Set{}
	for _, p := range paths {
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
	return s, nil
}

// LoadReader reads one stream of manifests; name is used in warnings and errors.
func LoadReader(name string, r io.Reader) (*Set, error) {
	s := &Set{}
	if err := s.read(name, r); err != nil {
		return nil, err
	}
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
	return s.read(name, f)
}

// read splits a stream into documents with apimachinery's YAML-or-JSON decoder (JSON streams and
// multi-document YAML alike) and decodes each.
func (s *Set) read(name string, r io.Reader) error {
	dec := utilyaml.NewYAMLOrJSONDecoder(r, 4096)
	for doc := 0; ; doc++ {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			return nil
		}
		src := Source{File: name, Doc: doc, Item: -1}
		if err != nil {
			return &Error{Source: src, Reason: "not valid YAML or JSON: " + err.Error()}
		}
		raw = bytes.TrimSpace(raw)
		if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
			continue // empty document (only comments or a bare ---)
		}
		if err := s.decodeDocument(src, raw); err != nil {
			return err
		}
	}
}
