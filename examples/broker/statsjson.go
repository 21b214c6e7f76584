package main

import (
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"
	"unicode"
)

// statsJSON turns a package's Stats value into what /v1/stats shows, in one
// shape whatever the package: keys in snake_case (a field's json tag wins
// where it has one), durations as Go duration strings ("1.5s") like every
// other duration of the API, times as RFC 3339. Values that marshal
// themselves (json.Marshaler, encoding.TextMarshaler) are left to do so.
func statsJSON(v any) any {
	return statsValue(reflect.ValueOf(v))
}

var (
	durationType  = reflect.TypeFor[time.Duration]()
	timeType      = reflect.TypeFor[time.Time]()
	marshalerType = reflect.TypeFor[json.Marshaler]()
	textType      = reflect.TypeFor[encoding.TextMarshaler]()
)

func statsValue(v reflect.Value) any {
	if !v.IsValid() {
		return nil
	}
	t := v.Type()
	switch {
	case t == durationType:
		return time.Duration(v.Int()).String()
	case t == timeType:
		return v.Interface()
	case t.Implements(marshalerType) || t.Implements(textType):
		return v.Interface()
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return statsValue(v.Elem())
	case reflect.Struct:
		out := make(map[string]any, v.NumField())
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name := snakeCase(f.Name)
			if tag, _, _ := strings.Cut(f.Tag.Get("json"), ","); tag == "-" {
				continue
			} else if tag != "" {
				name = tag
			}
			out[name] = statsValue(v.Field(i))
		}
		return out
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.IsNil() {
			return []any{}
		}
		out := make([]any, v.Len())
		for i := range out {
			out[i] = statsValue(v.Index(i))
		}
		return out
	case reflect.Map:
		out := make(map[string]any, v.Len())
		for it := v.MapRange(); it.Next(); {
			out[fmt.Sprint(it.Key().Interface())] = statsValue(it.Value())
		}
		return out
	}
	return v.Interface()
}

// snakeCase turns a Go field name into snake_case: LastFlushDuration →
// last_flush_duration, QueueID → queue_id, HTTP → http.
func snakeCase(name string) string {
	rs := []rune(name)
	var b strings.Builder
	for i, r := range rs {
		if unicode.IsUpper(r) && i > 0 {
			prev := rs[i-1]
			nextLower := i+1 < len(rs) && unicode.IsLower(rs[i+1])
			if unicode.IsLower(prev) || unicode.IsDigit(prev) || (unicode.IsUpper(prev) && nextLower) {
				b.WriteByte('_')
			}
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}
