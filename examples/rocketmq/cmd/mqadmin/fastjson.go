package main

import (
	"encoding/json"
	"errors"
	"fmt"
)

// errJSON is a body that is not even Apache's JSON.
var errJSON = errors.New("mqadmin: malformed JSON body")

// normalizeJSON turns the JSON Apache RocketMQ writes (fastjson) into
// standard JSON: object keys that are not strings — numbers ({0:"addr"},
// a broker's addresses by id) or whole objects ({{"topic":…}:{…}}, tables
// keyed by message queue) — become strings holding their JSON text. The
// rest is copied as is and checked by encoding/json afterwards.
func normalizeJSON(in []byte) ([]byte, error) {
	out := make([]byte, 0, len(in)+16)
	// stack of containers: '{' expecting a key, ':' in an object after a key, '[' in an array
	var stack []byte
	i := 0
	for i < len(in) {
		c := in[i]
		switch {
		case c == '"':
			j, err := skipString(in, i)
			if err != nil {
				return nil, err
			}
			out = append(out, in[i:j]...)
			i = j
			if n := len(stack); n > 0 && stack[n-1] == '{' {
				stack[n-1] = ':'
			}
			continue
		case c == '{' || c == '[':
			if n := len(stack); n > 0 && stack[n-1] == '{' && c == '{' {
				// an object as a key: copy it whole, quoted
				j, err := skipValue(in, i)
				if err != nil {
					return nil, err
				}
				key, _ := json.Marshal(string(in[i:j]))
				out = append(out, key...)
				stack[n-1] = ':'
				i = j
				continue
			}
			if len(stack) > 1000 {
				return nil, fmt.Errorf("%w: nested too deep", errJSON)
			}
			stack = append(stack, c)
		case c == '}' || c == ']':
			if len(stack) == 0 {
				return nil, fmt.Errorf("%w: unbalanced %q at %d", errJSON, c, i)
			}
			stack = stack[:len(stack)-1]
		case c == ',':
			if n := len(stack); n > 0 && stack[n-1] == ':' {
				stack[n-1] = '{'
			}
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ':':
		default:
			if n := len(stack); n > 0 && stack[n-1] == '{' {
				// a bare key (a number): quote it
				j := i
				for j < len(in) && in[j] != ':' && in[j] != ' ' && in[j] != '}' && in[j] != ',' {
					j++
				}
				key, _ := json.Marshal(string(in[i:j]))
				out = append(out, key...)
				stack[n-1] = ':'
				i = j
				continue
			}
		}
		out = append(out, c)
		i++
	}
	if len(stack) != 0 {
		return nil, fmt.Errorf("%w: unterminated", errJSON)
	}
	if !json.Valid(out) {
		return nil, errJSON
	}
	return out, nil
}

// skipString returns the index after the string starting at in[i] ('"').
func skipString(in []byte, i int) (int, error) {
	for j := i + 1; j < len(in); j++ {
		switch in[j] {
		case '\\':
			j++
		case '"':
			return j + 1, nil
		}
	}
	return 0, fmt.Errorf("%w: unterminated string", errJSON)
}

// skipValue returns the index after the object or array starting at in[i].
func skipValue(in []byte, i int) (int, error) {
	depth := 0
	for j := i; j < len(in); j++ {
		switch in[j] {
		case '"':
			k, err := skipString(in, j)
			if err != nil {
				return 0, err
			}
			j = k - 1
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return j + 1, nil
			}
		}
	}
	return 0, fmt.Errorf("%w: unterminated object key", errJSON)
}

// decodeJSON decodes an Apache JSON body into v.
func decodeJSON(body []byte, v any) error {
	norm, err := normalizeJSON(body)
	if err != nil {
		return err
	}
	return json.Unmarshal(norm, v)
}
