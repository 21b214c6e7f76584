package wire

import (
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// A hand-written reader and writer for the one JSON shape of a remoting
// header: a flat object of numbers and strings plus extFields, an object of
// strings. encoding/json was a third of the broker's CPU per request. The
// reader is conservative: on anything it does not expect (another value
// type, a duplicate, a number out of range) it reports !ok and the caller
// decodes with encoding/json instead; FuzzFastHeader checks that whenever it
// answers, encoding/json answers the same.

// The scanner reads src, the header converted to a string once: a plain
// string value is a substring of it, so a header of fifteen extFields costs
// one string allocation, not thirty. (A value kept for long keeps the
// header's few hundred bytes alive with it.)
type jsonScanner struct {
	b   string
	i   int
	esc strings.Builder
}

func (s *jsonScanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *jsonScanner) eat(c byte) bool {
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// str reads a JSON string.
func (s *jsonScanner) str() (string, bool) {
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return "", false
	}
	s.i++
	start := s.i
	// Most values are plain ASCII up to the closing quote: find it at
	// once, then check what lies before it.
	if q := strings.IndexByte(s.b[start:], '"'); q >= 0 {
		v := s.b[start : start+q]
		if plain(v) {
			s.i = start + q + 1
			return v, true
		}
	}
	for s.i < len(s.b) {
		c := s.b[s.i]
		if c == '"' {
			v := s.b[start:s.i]
			s.i++
			if !utf8.ValidString(v) {
				return "", false // encoding/json replaces bad bytes: let it
			}
			return v, true
		}
		if c == '\\' {
			return s.strEscaped(start)
		}
		if c < 0x20 {
			return "", false
		}
		s.i++
	}
	return "", false
}

// strEscaped reads the rest of a string with escapes, from s.i (at the
// first backslash); start is where the string's text began.
// plain reports whether v is printable ASCII without a backslash: a JSON
// string's text that means itself.
func plain(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 || c == '\\' || c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

func (s *jsonScanner) strEscaped(start int) (string, bool) {
	out := &s.esc
	out.Reset()
	// The text with escapes is at most as long as up to the next quote
	// that is not escaped: one allocation for the value.
	end := s.i
	for end < len(s.b) && s.b[end] != '"' {
		if s.b[end] == '\\' {
			end++
		}
		end++
	}
	out.Grow(end - start)
	out.WriteString(s.b[start:s.i])
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			v := out.String()
			out.Reset()
			if !utf8.ValidString(v) {
				return "", false
			}
			return v, true
		case c < 0x20:
			return "", false
		case c != '\\':
			out.WriteByte(c)
			s.i++
			continue
		}
		if s.i+1 >= len(s.b) {
			return "", false
		}
		e := s.b[s.i+1]
		s.i += 2
		switch e {
		case '"', '\\', '/':
			out.WriteByte(e)
		case 'b':
			out.WriteByte('\b')
		case 'f':
			out.WriteByte('\f')
		case 'n':
			out.WriteByte('\n')
		case 'r':
			out.WriteByte('\r')
		case 't':
			out.WriteByte('\t')
		case 'u':
			r, ok := s.hex4()
			if !ok {
				return "", false
			}
			if utf16.IsSurrogate(r) {
				if s.i+1 < len(s.b) && s.b[s.i] == '\\' && s.b[s.i+1] == 'u' {
					s.i += 2
					r2, ok := s.hex4()
					if !ok {
						return "", false
					}
					if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
						out.WriteRune(d)
						continue
					}
				}
				return "", false // lone surrogates: leave them to encoding/json
			}
			out.WriteRune(r)
		default:
			return "", false
		}
	}
	return "", false
}

func (s *jsonScanner) hex4() (rune, bool) {
	if s.i+4 > len(s.b) {
		return 0, false
	}
	v, err := strconv.ParseUint(s.b[s.i:s.i+4], 16, 32)
	if err != nil {
		return 0, false
	}
	s.i += 4
	return rune(v), true
}

// integer reads a JSON integer within [lo, hi] (no fraction or exponent).
func (s *jsonScanner) integer(lo, hi int64) (int64, bool) {
	s.ws()
	start := s.i
	if s.i < len(s.b) && s.b[s.i] == '-' {
		s.i++
	}
	digits := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	if s.i == digits || (s.b[digits] == '0' && s.i-digits > 1) {
		return 0, false
	}
	if s.i < len(s.b) && (s.b[s.i] == '.' || s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		return 0, false
	}
	v, err := strconv.ParseInt(s.b[start:s.i], 10, 64)
	if err != nil || v < lo || v > hi {
		return 0, false
	}
	return v, true
}

// fastDecodeHeader decodes the usual header; ok is false when the slow
// path must decide.
func fastDecodeHeader(b []byte) (cmd *Command, ok bool) {
	s := jsonScanner{b: string(b)}
	if !s.eat('{') {
		return nil, false
	}
	cmd = &Command{}
	var seen uint8
	hasCode := false
	if s.eat('}') {
		return nil, false // no code
	}
	for {
		key, ok := s.str()
		if !ok || !s.eat(':') {
			return nil, false
		}
		var bit uint8
		switch key {
		case "code":
			bit = 1
			v, ok := s.integer(-1<<15, 1<<15-1)
			if !ok {
				return nil, false
			}
			cmd.Code, hasCode = int16(v), true
		case "version":
			bit = 2
			v, ok := s.integer(-1<<15, 1<<15-1)
			if !ok {
				return nil, false
			}
			cmd.Version = int16(v)
		case "opaque", "flag":
			bit = 4
			if key == "flag" {
				bit = 8
			}
			v, ok := s.integer(-1<<31, 1<<31-1)
			if !ok {
				return nil, false
			}
			if key == "opaque" {
				cmd.Opaque = int32(v)
			} else {
				cmd.Flag = int32(v)
			}
		case "language", "remark":
			bit = 16
			if key == "remark" {
				bit = 32
			}
			v, ok := s.str()
			if !ok {
				return nil, false
			}
			if key == "language" {
				cmd.Language = v
			} else {
				cmd.Remark = v
			}
		case "extFields":
			bit = 64
			m, ok := s.stringMap()
			if !ok {
				return nil, false
			}
			cmd.ExtFields = m
		default:
			return nil, false
		}
		if seen&bit != 0 {
			return nil, false // duplicate key: encoding/json's last-wins rules
		}
		seen |= bit
		if s.eat(',') {
			continue
		}
		if !s.eat('}') {
			return nil, false
		}
		s.ws()
		if s.i != len(s.b) || !hasCode {
			return nil, false
		}
		return cmd, true
	}
}

func (s *jsonScanner) stringMap() (map[string]string, bool) {
	if !s.eat('{') {
		return nil, false
	}
	// Each pair has four quotes at least: a size hint that fits the map's
	// table to the header (a send's fourteen fields in two thirds of the memory of
	// a fixed hint of 16).
	m := make(map[string]string, strings.Count(s.b[s.i:], `"`)/4)
	if s.eat('}') {
		return m, true
	}
	for {
		k, ok := s.str()
		if !ok || !s.eat(':') {
			return nil, false
		}
		v, ok := s.str()
		if !ok {
			return nil, false
		}
		n := len(m)
		if m[k] = v; len(m) == n {
			return nil, false // a duplicate key
		}
		if s.eat(',') {
			continue
		}
		return m, s.eat('}')
	}
}

// appendJSONString appends s as a JSON string, as encoding/json writes it
// (invalid UTF-8 as U+FFFD; <, >, & escaped).
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c < 0x20 || c == '<' || c == '>' || c == '&':
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
		default:
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}

// appendJSONHeader writes a header as jsonHeader's encoding/json form.
func appendJSONHeader(b []byte, cmd *Command, lang string) []byte {
	b = append(b, `{"code":`...)
	b = strconv.AppendInt(b, int64(cmd.Code), 10)
	b = append(b, `,"language":`...)
	b = appendJSONString(b, lang)
	b = append(b, `,"version":`...)
	b = strconv.AppendInt(b, int64(cmd.Version), 10)
	b = append(b, `,"opaque":`...)
	b = strconv.AppendInt(b, int64(cmd.Opaque), 10)
	b = append(b, `,"flag":`...)
	b = strconv.AppendInt(b, int64(cmd.Flag), 10)
	if cmd.Remark != "" {
		b = append(b, `,"remark":`...)
		b = appendJSONString(b, cmd.Remark)
	}
	if len(cmd.ExtFields) > 0 {
		b = append(b, `,"extFields":{`...)
		first := true
		for k, v := range cmd.ExtFields {
			if !first {
				b = append(b, ',')
			}
			first = false
			b = appendJSONString(b, k)
			b = append(b, ':')
			b = appendJSONString(b, v)
		}
		b = append(b, '}')
	}
	return append(b, '}')
}
