package boundedjson

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

type inner struct {
	N int64 `json:"n"`
}

type embedded struct {
	Promoted []inner `json:"promoted"`
}

type doc struct {
	embedded
	Items  []inner            `json:"items"`
	Name   string             `json:"name"`
	Labels map[string]string  `json:"labels"`
	Ptr    *inner             `json:"ptr"`
	Deep   *doc               `json:"deep"`
	Raw    json.RawMessage    `json:"raw"`
	Any    any                `json:"any"`
	Skip   []inner            `json:"-"`
	ByName map[string][]inner `json:"byName"`
}

// The estimate, by hand: presized slices at their elements (8 bytes each), other slices at twice
// theirs, map entries at twice key+value (16+16) plus the key's bytes, strings at their bytes,
// pointers at their target's size, RawMessage at its bytes, an interface at 32 times its bytes.
func TestEstimateByHand(t *testing.T) {
	for _, c := range []struct {
		json string
		want int64
	}{
		{`{"items":[{"n":1},{"n":2},{}]}`, 3 * 8},                                          // presized: top-level field
		{`{"promoted":[{},{}]}`, 2 * 8},                                                    // promoted from the embedded struct
		{`{"ITEMS":[{}]}`, 8},                                                              // case-insensitive, as encoding/json
		{`{"name":"abcd"}`, 4},                                                             // string bytes
		{`{"labels":{"ab":"xyz"}}`, 2*(16+16) + 2 + 3},                                     // entry, key bytes, value bytes
		{`{"ptr":{"n":5}}`, 8},                                                             // pointed-to struct
		{`{"deep":{"items":[{}]}}`, int64(reflect.TypeFor[doc]().Size()) + 8},              // presized two fields deep
		{`{"deep":{"deep":{"items":[{}]}}}`, 2*int64(reflect.TypeFor[doc]().Size()) + 2*8}, // three deep: grows
		{`{"raw":[1,2,3]}`, 7},
		{`{"any":[1,2]}`, 5 * OpaqueFactor},
		{`{"skip":[{},{}],"unknown":[{},{},{}]}`, 0},        // ignored keys cost nothing
		{`{"byName":{"k":[{},{}]}}`, 2*(16+24) + 1 + 2*2*8}, // a slice inside a map grows
	} {
		rep, err := Check([]byte(c.json), reflect.TypeFor[doc](), Limits{})
		if err != nil {
			t.Errorf("%s: %v", c.json, err)
			continue
		}
		if rep.Bytes != c.want {
			t.Errorf("%s: estimate %d, want %d", c.json, rep.Bytes, c.want)
		}
	}
}

func TestLimitsNameThePath(t *testing.T) {
	caps := map[reflect.Type]Cap{reflect.TypeFor[inner](): {Name: "inners", Max: 3}}
	for _, c := range []struct {
		json string
		l    Limits
		want string
	}{
		{`{"items":[{},{}],"deep":{"items":[{},{}]}}`, Limits{Caps: caps}, "deep.items[1]: more than 3 inners"},
		{`{"items":[{},{},{},{}]}`, Limits{MaxBytes: 24}, "items[3]: decoding would allocate more than 24 bytes"},
		{`{"deep":{"deep":{"deep":{}}}}`, Limits{MaxDepth: 3}, "deep.deep.deep: nested deeper than 3"},
		{`{"unknown":[[[[[]]]]]}`, Limits{MaxDepth: 3}, "nested deeper than 3"},
	} {
		_, err := Check([]byte(c.json), reflect.TypeFor[doc](), c.l)
		if !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want %q", c.json, err, c.want)
		}
	}
}

func TestSyntaxErrors(t *testing.T) {
	for _, in := range []string{``, `{`, `{"a"`, `{"a":}`, `{"name":"abc`, `[1,2`, `{} {}`, `{"a":1,}x`, `]`, `{"a" 1}`} {
		if _, err := Check([]byte(in), reflect.TypeFor[doc](), Limits{}); !errors.Is(err, ErrSyntax) {
			t.Errorf("%q: err %v, want ErrSyntax", in, err)
		}
	}
}

// Unmarshal decodes exactly what json.Unmarshal decodes (presized slices included).
func TestUnmarshalMatchesEncodingJSON(t *testing.T) {
	in := `{"items":[{"n":1},{"n":2}],"name":"x","labels":{"a":"b"},"deep":{"items":[{"n":3}],"name":"y"},"promoted":[{"n":4}]}`
	var got, want doc
	if err := Unmarshal([]byte(in), &got, Limits{}); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(in), &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Unmarshal %+v, json.Unmarshal %+v", got, want)
	}
	if cap(got.Items) != 2 || cap(got.Deep.Items) != 1 {
		t.Errorf("capacities %d and %d, want the lengths 2 and 1 (presized)", cap(got.Items), cap(got.Deep.Items))
	}
}

// FuzzCheck: Check never panics; it calls valid JSON invalid never; and what it lets through,
// Unmarshal decodes as encoding/json does.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{`{"items":[{"n":1}]}`, `{"labels":{"a\"b":"c"}}`, `{"deep":{"deep":null}}`, `[]`, `"x"`, `{"any":{"a":[1,{"b":2}]}}`,
		`{"n\u0061me":"escaped key"}`, `{"raw":{"x":[1,2,3]}}`, `1e5`, `{"items":[1]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		_, err := Check(data, reflect.TypeFor[doc](), Limits{MaxDepth: 20})
		if json.Valid(data) && errors.Is(err, ErrSyntax) {
			t.Fatalf("Check(%q) calls valid JSON invalid: %v", data, err)
		}
		if err != nil {
			return
		}
		var got, want doc
		errGot := Unmarshal(data, &got, Limits{})
		errWant := json.Unmarshal(data, &want)
		if (errGot == nil) != (errWant == nil) || (errGot == nil && !reflect.DeepEqual(got, want)) {
			t.Fatalf("Unmarshal(%q) = %+v, %v; json.Unmarshal = %+v, %v", data, got, errGot, want, errWant)
		}
	})
}
