// Package boundedjson checks, before anything is allocated, what encoding/json would build from
// a document: it walks the JSON bytes beside the Go type they decode into and adds up the bytes
// json.Unmarshal would allocate (slice elements, map entries, strings, pointed-to structs), the
// elements of chosen types (pods, nodes, containers ...) and the nesting depth. A document over
// a limit is refused with the field path and the limit; the walk itself allocates nothing that
// grows with the input.
//
// Why: a small message can describe a huge value ("[{},{},...]" of 2 million pods is 6 MB of
// JSON and 2.6 GB of corev1.Pod), so a decoder that only bounds bytes still runs out of memory.
// The estimate is an upper bound of the live result (slices counted at twice their elements for
// append growth); a json.Unmarshaler's value is opaque and counted at OpaqueFactor times its bytes.
package boundedjson

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
)

// ErrLimit is wrapped by every refusal of Check and Unmarshal for exceeding a limit.
var ErrLimit = errors.New("over a decoding limit")

// ErrSyntax is wrapped when the scan finds the document is not JSON.
var ErrSyntax = errors.New("not valid JSON")

// DefaultMaxDepth bounds nesting when Limits.MaxDepth is 0: Kubernetes objects nest about 15
// deep (a pod's affinity term's label selector requirement's values), so 64 leaves room and a
// hostile "[[[[...]]]]" stops early.
const DefaultMaxDepth = 64

// OpaqueFactor is the multiple of its JSON bytes a json.Unmarshaler's value is counted at (its
// own decoding is out of sight; a NodeClass decodes into a struct of slices).
const OpaqueFactor = 32

// growth is the factor slice elements are counted at: json.Unmarshal grows slices as append does,
// so the old and the new backing array are live together while it grows.
const growth = 2

// Cap bounds the elements of one Go type across a whole document.
type Cap struct {
	// Name names the objects in errors ("pods").
	Name string
	Max  int
}

// Limits bounds what Check lets through.
type Limits struct {
	// MaxBytes bounds the estimated bytes json.Unmarshal allocates for the result; 0: no bound.
	MaxBytes int64
	// MaxDepth bounds the nesting of objects and arrays; 0: DefaultMaxDepth.
	MaxDepth int
	// Caps bound the elements, across the document, of the slices whose element type is the key
	// (e.g. reflect.TypeFor[corev1.Pod]()).
	Caps map[reflect.Type]Cap
}

// Report is what Check found.
type Report struct {
	// Bytes is the estimated allocation of json.Unmarshal.
	Bytes int64
	// Counts are the elements of each capped type.
	Counts map[reflect.Type]int
	// Depth is the deepest nesting seen.
	Depth int
	// Lengths are the element counts of the slices reached from the top through struct fields
	// only ("pods", "snapshot.nodes"), at most presizeDepth fields deep: Unmarshal allocates
	// them at their final size, so json.Unmarshal's append growth leaves no garbage behind.
	Lengths map[string]int
}

// presizeDepth is how many struct fields deep Lengths reaches.
const presizeDepth = 2

// Unmarshal checks data against the limits for v's type, then decodes it with json.Unmarshal.
func Unmarshal(data []byte, v any, l Limits) error {
	t := reflect.TypeOf(v)
	if t == nil || t.Kind() != reflect.Pointer {
		return fmt.Errorf("boundedjson: Unmarshal needs a non-nil pointer, got %T", v)
	}
	rep, err := Check(data, t.Elem(), l)
	if err != nil {
		return err
	}
	presize(reflect.ValueOf(v).Elem(), "", rep.Lengths)
	return json.Unmarshal(data, v)
}

// presize gives the empty slices of v named in lengths their final capacity (json.Unmarshal
// appends to a slice's existing backing array) and allocates the pointers leading to them.
func presize(v reflect.Value, prefix string, lengths map[string]int) {
	if len(lengths) == 0 || v.Kind() != reflect.Struct {
		return
	}
	ti := infoOf(v.Type())
	ti.fieldsOnce.Do(ti.buildFields)
	for name, idx := range ti.index {
		path := prefix + name
		f := v.FieldByIndex(idx)
		switch f.Kind() {
		case reflect.Slice:
			if n := lengths[path]; n > 0 && f.IsNil() {
				f.Set(reflect.MakeSlice(f.Type(), 0, n))
			}
		case reflect.Pointer:
			if f.Type().Elem().Kind() == reflect.Struct && hasPrefix(lengths, path+".") {
				if f.IsNil() {
					f.Set(reflect.New(f.Type().Elem()))
				}
				presize(f.Elem(), path+".", lengths)
			}
		case reflect.Struct:
			if hasPrefix(lengths, path+".") {
				presize(f, path+".", lengths)
			}
		}
	}
}

func hasPrefix(m map[string]int, prefix string) bool {
	for k := range m {
		if strings.HasPrefix(k, prefix) {
			return true
		}
	}
	return false
}

// Check walks data as json.Unmarshal would decode it into a value of type t and returns what it
// would build. Errors wrap ErrLimit (naming the field path, the count and the limit) or
// ErrSyntax.
func Check(data []byte, t reflect.Type, l Limits) (Report, error) {
	s := scanner{data: data, l: &l, maxDepth: l.MaxDepth, onPath: true}
	if s.maxDepth <= 0 {
		s.maxDepth = DefaultMaxDepth
	}
	if len(l.Caps) > 0 {
		s.counts = make(map[reflect.Type]int, len(l.Caps))
	}
	err := s.value(infoOf(t))
	if err == nil {
		s.ws()
		if s.i != len(s.data) {
			err = s.syntax("data after the top-level value")
		}
	}
	return Report{Bytes: s.bytes, Counts: s.counts, Depth: s.deepest, Lengths: s.lengths}, err
}

// typeInfo is what the walk needs of a Go type, computed once per type.
type typeInfo struct {
	t      reflect.Type
	kind   reflect.Kind
	size   int64
	opaque bool // implements json.Unmarshaler (by pointer): its value is not walked
	raw    bool // json.RawMessage: a copy of its bytes
	elem   func() *typeInfo
	key    reflect.Type // map key

	fieldsOnce sync.Once
	fields     map[string]fieldInfo // JSON name → field
	folded     map[string]fieldInfo // lower-cased JSON name → field
	index      map[string][]int     // JSON name → field index, for fields of the struct itself
}

// fieldInfo is a struct field as a JSON key finds it: its type and its JSON name.
type fieldInfo struct {
	ti   *typeInfo
	name []byte
}

var (
	infos       sync.Map // reflect.Type → *typeInfo
	unmarshaler = reflect.TypeFor[json.Unmarshaler]()
	rawMessage  = reflect.TypeFor[json.RawMessage]()
)

func infoOf(t reflect.Type) *typeInfo {
	if ti, ok := infos.Load(t); ok {
		return ti.(*typeInfo)
	}
	ti := &typeInfo{t: t, kind: t.Kind(), size: int64(t.Size())}
	ti.opaque = t.Kind() != reflect.Pointer && (t.Implements(unmarshaler) || reflect.PointerTo(t).Implements(unmarshaler))
	ti.raw = t == rawMessage
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map:
		elem := t.Elem()
		ti.elem = sync.OnceValue(func() *typeInfo { return infoOf(elem) })
		if t.Kind() == reflect.Map {
			ti.key = t.Key()
		}
	}
	actual, _ := infos.LoadOrStore(t, ti)
	return actual.(*typeInfo)
}

// field returns the type of the struct field a JSON key decodes into (encoding/json's rule: the
// exact name first, then a case-insensitive match), or nil when the key is ignored.
func (ti *typeInfo) field(key []byte) fieldInfo {
	ti.fieldsOnce.Do(ti.buildFields)
	if f, ok := ti.fields[string(key)]; ok {
		return f
	}
	return ti.folded[strings.ToLower(string(key))]
}

// buildFields collects the JSON names of a struct's fields, promoting the fields of embedded
// structs without a JSON name as encoding/json does (the shallowest name wins).
func (ti *typeInfo) buildFields() {
	ti.fields, ti.folded, ti.index = map[string]fieldInfo{}, map[string]fieldInfo{}, map[string][]int{}
	type level struct {
		t     reflect.Type
		depth int
	}
	queue := []level{{ti.t, 0}}
	depthOf := map[string]int{}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		for i := range cur.t.NumField() {
			f := cur.t.Field(i)
			tag := f.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, _, _ := strings.Cut(tag, ",")
			ft := f.Type
			if f.Anonymous && name == "" {
				inner := ft
				if inner.Kind() == reflect.Pointer {
					inner = inner.Elem()
				}
				if inner.Kind() == reflect.Struct && cur.depth < 8 {
					queue = append(queue, level{inner, cur.depth + 1})
					continue
				}
			}
			if !f.IsExported() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			if d, ok := depthOf[name]; ok && d <= cur.depth {
				continue
			}
			depthOf[name] = cur.depth
			fi := fieldInfo{infoOf(ft), []byte(name)}
			ti.fields[name] = fi
			if cur.depth == 0 {
				ti.index[name] = f.Index
			}
			if _, ok := ti.folded[strings.ToLower(name)]; !ok {
				ti.folded[strings.ToLower(name)] = fi
			}
		}
	}
}

type scanner struct {
	data     []byte
	i        int
	l        *Limits
	bytes    int64
	counts   map[reflect.Type]int
	depth    int
	deepest  int
	maxDepth int
	// path holds the keys and indexes leading to the current value, rendered only for errors.
	path []step
	// onPath: the current value is reached from the top through struct fields only (keys), so
	// a slice here is presized (Report.Lengths).
	onPath  bool
	keys    [][]byte
	lengths map[string]int
}

type step struct {
	key   []byte
	index int
}

func joinKeys(keys [][]byte) []byte {
	var b []byte
	for i, k := range keys {
		if i > 0 {
			b = append(b, '.')
		}
		b = append(b, k...)
	}
	return b
}

func (s *scanner) pathString() string {
	var b strings.Builder
	for i, p := range s.path {
		if p.key != nil {
			if i > 0 {
				b.WriteByte('.')
			}
			b.Write(p.key[:min(len(p.key), 64)])
		} else {
			fmt.Fprintf(&b, "[%d]", p.index)
		}
	}
	if b.Len() == 0 {
		return "(top level)"
	}
	return b.String()
}

func (s *scanner) syntax(why string) error {
	return fmt.Errorf("%w: at byte %d: %s", ErrSyntax, s.i, why)
}

func (s *scanner) add(n int64) error {
	s.bytes += n
	if s.l.MaxBytes > 0 && s.bytes > s.l.MaxBytes {
		return fmt.Errorf("%w: %s: decoding would allocate more than %d bytes (the limit for this message)", ErrLimit, s.pathString(), s.l.MaxBytes)
	}
	return nil
}

func (s *scanner) ws() {
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) enter() error {
	s.depth++
	s.deepest = max(s.deepest, s.depth)
	if s.depth > s.maxDepth {
		return fmt.Errorf("%w: %s: nested deeper than %d", ErrLimit, s.pathString(), s.maxDepth)
	}
	return nil
}

// value walks one JSON value decoding into ti (nil: ignored by the decoder).
func (s *scanner) value(ti *typeInfo) error {
	s.ws()
	if s.i >= len(s.data) {
		return s.syntax("unexpected end of input")
	}
	if ti != nil && ti.kind == reflect.Pointer && s.data[s.i] != 'n' {
		if err := s.add(ti.elem().size); err != nil {
			return err
		}
		return s.value(ti.elem())
	}
	if ti == nil || ti.opaque {
		start := s.i
		if err := s.skip(); err != nil {
			return err
		}
		switch {
		case ti == nil:
			return nil
		case ti.raw:
			return s.add(int64(s.i - start))
		}
		return s.add(int64(s.i-start) * OpaqueFactor)
	}
	switch c := s.data[s.i]; {
	case c == '{':
		switch ti.kind {
		case reflect.Struct:
			return s.object(ti)
		case reflect.Map:
			return s.mapObject(ti)
		case reflect.Interface:
			return s.generic()
		}
	case c == '[':
		switch ti.kind {
		case reflect.Slice, reflect.Array:
			return s.array(ti)
		case reflect.Interface:
			return s.generic()
		}
	case c == '"':
		n, err := s.str()
		if err != nil {
			return err
		}
		switch ti.kind {
		case reflect.String, reflect.Slice, reflect.Interface:
			return s.add(int64(n))
		}
		return nil
	}
	return s.skip() // a literal, or a mismatch json.Unmarshal will report
}

// generic is a value decoded into an interface: maps and slices of interfaces, about 32 bytes
// per input byte at worst.
func (s *scanner) generic() error {
	start := s.i
	if err := s.skip(); err != nil {
		return err
	}
	return s.add(int64(s.i-start) * OpaqueFactor)
}

func (s *scanner) object(ti *typeInfo) error {
	if err := s.enter(); err != nil {
		return err
	}
	s.i++ // '{'
	s.path = append(s.path, step{})
	onPath := s.onPath
	defer func() { s.onPath = onPath }()
	for first := true; ; first = false {
		s.ws()
		if s.i < len(s.data) && s.data[s.i] == '}' && first {
			break
		}
		key, err := s.key()
		if err != nil {
			return err
		}
		s.path[len(s.path)-1] = step{key: key}
		f := ti.field(key)
		s.onPath = onPath && f.ti != nil && len(s.keys) < presizeDepth
		if s.onPath {
			s.keys = append(s.keys, f.name)
		}
		err = s.value(f.ti)
		if s.onPath {
			s.keys = s.keys[:len(s.keys)-1]
		}
		if err != nil {
			return err
		}
		if done, err := s.next('}'); err != nil || done {
			if err != nil {
				return err
			}
			break
		}
	}
	s.i++ // '}'
	s.path = s.path[:len(s.path)-1]
	s.depth--
	return nil
}

func (s *scanner) mapObject(ti *typeInfo) error {
	if err := s.enter(); err != nil {
		return err
	}
	s.i++
	s.path = append(s.path, step{})
	onPath := s.onPath
	s.onPath = false
	defer func() { s.onPath = onPath }()
	entry := int64(ti.key.Size()) + ti.elem().size
	for first := true; ; first = false {
		s.ws()
		if s.i < len(s.data) && s.data[s.i] == '}' && first {
			break
		}
		key, err := s.key()
		if err != nil {
			return err
		}
		s.path[len(s.path)-1] = step{key: key}
		// A map entry: its key and value in a bucket (Go maps run at most ~80% full, and grow
		// by doubling) plus the key's bytes.
		if err := s.add(entry*growth + int64(len(key))); err != nil {
			return err
		}
		if err := s.value(ti.elem()); err != nil {
			return err
		}
		if done, err := s.next('}'); err != nil || done {
			if err != nil {
				return err
			}
			break
		}
	}
	s.i++
	s.path = s.path[:len(s.path)-1]
	s.depth--
	return nil
}

func (s *scanner) array(ti *typeInfo) error {
	if err := s.enter(); err != nil {
		return err
	}
	s.i++ // '['
	elem := ti.elem()
	var c Cap
	capped := false
	if ti.kind == reflect.Slice && s.l.Caps != nil {
		c, capped = s.l.Caps[elem.t]
	}
	// A presized slice is allocated once at its length; any other grows as append does.
	presized := s.onPath && ti.kind == reflect.Slice && len(s.keys) > 0
	factor := int64(growth)
	if presized {
		factor = 1
	}
	onPath := s.onPath
	s.onPath = false
	defer func() { s.onPath = onPath }()
	s.path = append(s.path, step{})
	n := 0
	for ; ; n++ {
		s.ws()
		if s.i < len(s.data) && s.data[s.i] == ']' && n == 0 {
			break
		}
		s.path[len(s.path)-1] = step{index: n}
		if ti.kind == reflect.Slice {
			if err := s.add(elem.size * factor); err != nil {
				return err
			}
			if capped {
				s.counts[elem.t]++
				if got := s.counts[elem.t]; got > c.Max {
					return fmt.Errorf("%w: %s: more than %d %s in one message (the limit)", ErrLimit, s.pathString(), c.Max, c.Name)
				}
			}
		}
		if err := s.value(elem); err != nil {
			return err
		}
		if done, err := s.next(']'); err != nil || done {
			if err != nil {
				return err
			}
			n++
			break
		}
	}
	s.i++ // ']'
	s.path = s.path[:len(s.path)-1]
	if presized && n > 0 {
		if s.lengths == nil {
			s.lengths = map[string]int{}
		}
		s.lengths[string(joinKeys(s.keys))] += n
	}
	s.depth--
	return nil
}

// next reads the separator after a member or element: ',' (false) or the closing byte (true).
func (s *scanner) next(closing byte) (bool, error) {
	s.ws()
	if s.i >= len(s.data) {
		return false, s.syntax("unexpected end of input")
	}
	switch s.data[s.i] {
	case ',':
		s.i++
		return false, nil
	case closing:
		return true, nil
	}
	return false, s.syntax(fmt.Sprintf("expected ',' or %q", closing))
}

// key reads an object key and its ':'; an escaped key is unquoted (rare; allocates).
func (s *scanner) key() ([]byte, error) {
	s.ws()
	if s.i >= len(s.data) || s.data[s.i] != '"' {
		return nil, s.syntax("expected a string key")
	}
	start := s.i
	if _, err := s.str(); err != nil {
		return nil, err
	}
	raw := s.data[start+1 : s.i-1]
	for _, c := range raw {
		if c == '\\' {
			var k string
			if err := json.Unmarshal(s.data[start:s.i], &k); err != nil {
				return nil, s.syntax("invalid key")
			}
			raw = []byte(k)
			break
		}
	}
	s.ws()
	if s.i >= len(s.data) || s.data[s.i] != ':' {
		return nil, s.syntax("expected ':' after a key")
	}
	s.i++
	return raw, nil
}

// str moves past a string starting at s.i and returns its length in bytes as written.
func (s *scanner) str() (int, error) {
	start := s.i
	s.i++
	for {
		j := indexQuoteOrBackslash(s.data[s.i:])
		if j < 0 {
			s.i = len(s.data)
			return 0, s.syntax("unterminated string")
		}
		s.i += j
		if s.data[s.i] == '"' {
			s.i++
			return s.i - start - 2, nil
		}
		s.i += 2 // an escape and the byte it escapes
		if s.i > len(s.data) {
			return 0, s.syntax("unterminated string")
		}
	}
}

func indexQuoteOrBackslash(b []byte) int {
	for i, c := range b {
		if c == '"' || c == '\\' {
			return i
		}
	}
	return -1
}

// skip moves past one value of any shape without building anything (iteratively, so depth
// costs no stack).
func (s *scanner) skip() error {
	s.ws()
	if s.i >= len(s.data) {
		return s.syntax("unexpected end of input")
	}
	depth := 0
	for {
		if s.i >= len(s.data) {
			return s.syntax("unexpected end of input")
		}
		switch c := s.data[s.i]; c {
		case '"':
			if _, err := s.str(); err != nil {
				return err
			}
		case '{', '[':
			depth++
			if s.depth+depth > s.maxDepth {
				return fmt.Errorf("%w: %s: nested deeper than %d", ErrLimit, s.pathString(), s.maxDepth)
			}
			s.deepest = max(s.deepest, s.depth+depth)
			s.i++
		case '}', ']':
			depth--
			s.i++
			if depth < 0 {
				return s.syntax("unbalanced bracket")
			}
		default:
			s.i++
		}
		if depth == 0 && !(s.i < len(s.data) && isLiteralByte(s.data[s.i]) && isLiteralByte(s.data[s.i-1])) {
			return nil
		}
	}
}

// isLiteralByte reports whether c may be part of a number, true, false or null.
func isLiteralByte(c byte) bool {
	return c == '-' || c == '+' || c == '.' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}
