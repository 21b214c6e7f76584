package broker

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/brokercore/brokercore"
)

// ErrBadRequest reports a request whose extFields are missing a field or
// carry a value out of range. The answer is SYSTEM_ERROR with the error as
// remark; nothing is changed.
var ErrBadRequest = errors.New("bad request")

// fields reads typed values out of extFields, keeping the first error.
type fields struct {
	ext map[string]string
	err error
}

func (f *fields) fail(format string, args ...any) {
	if f.err == nil {
		f.err = fmt.Errorf("%w: "+format, append([]any{ErrBadRequest}, args...)...)
	}
}

// str returns a required field (first of the names present: long and V2
// one-letter names).
func (f *fields) str(names ...string) string {
	for _, n := range names {
		if v, ok := f.ext[n]; ok {
			return v
		}
	}
	if f.ext == nil {
		f.fail("missing extFields (need %s)", names[0])
	} else {
		f.fail("missing field %s", names[0])
	}
	return ""
}

// opt returns an optional field, "" when absent.
func (f *fields) opt(names ...string) string {
	for _, n := range names {
		if v, ok := f.ext[n]; ok {
			return v
		}
	}
	return ""
}

// int64In parses a required integer field within [lo, hi].
func (f *fields) int64In(lo, hi int64, names ...string) int64 {
	s := f.str(names...)
	if f.err != nil {
		return 0
	}
	return f.parse(names[0], s, lo, hi)
}

// optInt64 parses an optional integer field (def when absent or empty).
func (f *fields) optInt64(def, lo, hi int64, names ...string) int64 {
	s := f.opt(names...)
	if s == "" {
		return def
	}
	return f.parse(names[0], s, lo, hi)
}

func (f *fields) parse(name, s string, lo, hi int64) int64 {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		f.fail("field %s=%q is not an integer", name, s)
		return 0
	}
	if v < lo || v > hi {
		f.fail("field %s=%d outside [%d, %d]", name, v, lo, hi)
		return 0
	}
	return v
}

func (f *fields) topic(names ...string) string {
	t := f.str(names...)
	if f.err == nil {
		if err := brokercore.CheckTopicName(t); err != nil {
			f.fail("%v", err)
		}
	}
	return t
}

func (f *fields) group(names ...string) string {
	g := f.str(names...)
	if f.err == nil {
		if err := brokercore.CheckGroupName(g); err != nil {
			f.fail("%v", err)
		}
	}
	return g
}

func itoa(n int) string { return strconv.Itoa(n) }

func i64(n int64) string { return strconv.FormatInt(n, 10) }

const (
	maxInt32 = 1<<31 - 1
	maxInt64 = 1<<63 - 1
)
