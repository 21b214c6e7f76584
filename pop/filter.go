package pop

import (
	"fmt"
	"slices"
	"strings"
)

// filter.go holds tag filters: a Request.Filter is a subscription
// expression as RocketMQ clients send it. "" and "*" match every message;
// "A || B || C" matches a message whose Tags is one of the listed tags
// (spaces around "||" are optional). A filter is per group and topic.

// maxFilterLen bounds Request.Filter.
const maxFilterLen = 4096

// tagFilter is a parsed Request.Filter. The zero value matches everything.
type tagFilter struct {
	expr string   // normalized: "" for all, else the sorted tags joined by "||"
	tags []string // sorted, distinct; nil = all
}

// parseFilter parses a tag expression; the error says what is wrong.
func parseFilter(s string) (tagFilter, error) {
	if len(s) > maxFilterLen {
		return tagFilter{}, fmt.Errorf("filter of %d bytes exceeds %d", len(s), maxFilterLen)
	}
	s = strings.TrimSpace(s)
	if s == "" || s == "*" {
		return tagFilter{}, nil
	}
	parts := strings.Split(s, "||")
	tags := make([]string, 0, len(parts))
	for _, p := range parts {
		p = strings.TrimSpace(p)
		switch {
		case p == "":
			return tagFilter{}, fmt.Errorf("filter %q: empty tag (use \"A || B\")", s)
		case p == "*":
			return tagFilter{}, fmt.Errorf("filter %q: \"*\" must stand alone", s)
		case strings.ContainsAny(p, " \t\r\n|*"):
			return tagFilter{}, fmt.Errorf("filter %q: tag %q contains a space, '|' or '*' (tags are separated by \"||\")", s, p)
		}
		tags = append(tags, p)
	}
	slices.Sort(tags)
	tags = slices.Compact(tags)
	return tagFilter{expr: strings.Join(tags, "||"), tags: tags}, nil
}

// all reports whether the filter matches every message.
func (f tagFilter) all() bool { return f.tags == nil }

// match reports whether a message with these tags is delivered.
func (f tagFilter) match(tags string) bool {
	if f.tags == nil {
		return true
	}
	if len(f.tags) <= 8 {
		for _, t := range f.tags {
			if t == tags {
				return true
			}
		}
		return false
	}
	_, ok := slices.BinarySearch(f.tags, tags)
	return ok
}

// String is the filter as logged: "*" for all.
func (f tagFilter) String() string {
	if f.tags == nil {
		return "*"
	}
	return strings.ReplaceAll(f.expr, "||", " || ")
}
