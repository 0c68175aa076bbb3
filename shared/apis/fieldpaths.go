package apis

import (
	"bytes"
	"encoding/json"
	"reflect"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// locateErrors walks a decoded JSON value alongside the Go type it must fill and reports every
// unknown field and every value that does not decode, each at its field path. encoding/json
// stops at the first bad value and custom unmarshalers (durations, quantities) report no path,
// so this walk is what lets Decode name the field and report all problems at once.
func locateErrors(raw any, t reflect.Type, path *field.Path) field.ErrorList {
	if raw == nil {
		return nil
	}
	pt := reflect.PointerTo(t)
	if pt.Implements(reflect.TypeFor[json.Unmarshaler]()) {
		return tryDecode(raw, t, path)
	}
	switch t.Kind() {
	case reflect.Pointer:
		return locateErrors(raw, t.Elem(), path)
	case reflect.Struct:
		m, ok := raw.(map[string]any)
		if !ok {
			return field.ErrorList{field.Invalid(path, raw, "must be an object")}
		}
		fields := map[string]reflect.Type{}
		collectFields(t, fields)
		var errs field.ErrorList
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			ft, known := fields[k]
			if !known {
				errs = append(errs, field.Forbidden(path.Child(k), "unknown field"))
				continue
			}
			errs = append(errs, locateErrors(m[k], ft, path.Child(k))...)
		}
		return errs
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 { // []byte is a base64 string
			return tryDecode(raw, t, path)
		}
		s, ok := raw.([]any)
		if !ok {
			return field.ErrorList{field.Invalid(path, raw, "must be a list")}
		}
		var errs field.ErrorList
		for i, e := range s {
			errs = append(errs, locateErrors(e, t.Elem(), path.Index(i))...)
		}
		return errs
	case reflect.Map:
		m, ok := raw.(map[string]any)
		if !ok {
			return field.ErrorList{field.Invalid(path, raw, "must be an object")}
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var errs field.ErrorList
		for _, k := range keys {
			errs = append(errs, locateErrors(m[k], t.Elem(), path.Key(k))...)
		}
		return errs
	default:
		return tryDecode(raw, t, path)
	}
}

// collectFields maps JSON names to field types, promoting embedded and ",inline" structs.
func collectFields(t reflect.Type, out map[string]reflect.Type) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				collectFields(ft, out)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
}

func tryDecode(raw any, t reflect.Type, path *field.Path) field.ErrorList {
	b, err := json.Marshal(raw)
	if err != nil {
		return field.ErrorList{field.Invalid(path, raw, err.Error())}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(reflect.New(t).Interface()); err != nil {
		msg := err.Error()
		var te *json.UnmarshalTypeError
		if ok := asTypeError(err, &te); ok {
			msg = "must be " + jsonKind(t) + ", got " + te.Value
		}
		return field.ErrorList{field.Invalid(path, raw, msg)}
	}
	return nil
}

func asTypeError(err error, te **json.UnmarshalTypeError) bool {
	e, ok := err.(*json.UnmarshalTypeError)
	if ok {
		*te = e
	}
	return ok
}

func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	}
	return "a " + t.Kind().String()
}
