package pop

import (
	"fmt"
	"slices"
	"strings"
)

// filter.go holds the one tag-filter grammar of the library: a
// subscription expression of type TAG as RocketMQ clients send it, parsed
// with Apache RocketMQ's rules (FilterAPI.buildSubscriptionData) and matched
// as its broker and proxy match (the tag set contains the message's tags).
// Every front-end parses with ParseFilter, so a remoting pull, a gRPC
// receive and a pop agree on what an expression means.

// MaxFilterLen bounds an expression (Apache has no bound; one keeps a
// request from making the broker hold an arbitrary set).
const MaxFilterLen = 4096

// FilterAll is the expression that matches every message (Apache's
// SubscriptionData.SUB_ALL).
const FilterAll = "*"

// Filter is a parsed tag expression. The zero value matches every message.
// A Filter is immutable and safe for concurrent use.
type Filter struct {
	expr string   // normalized: "" for all, else the sorted tags joined by "||"
	tags []string // sorted, distinct; nil = all
}

// ParseFilter parses a TAG subscription expression with Apache RocketMQ's
// rules:
//
//   - "" and "*" (exactly) match every message;
//   - anything else is split at each "||"; each part is trimmed (of every
//     byte up to ' ', as Java's String.trim) and empty parts are dropped;
//     the remaining parts are the tags, and a message matches when its Tags
//     equals one of them. A message without tags matches no tag list.
//
// So " A ||  B " is {A, B}; "A ||" and "|| A" are {A}; "A || *" is {A, *},
// where "*" is a literal tag (Apache treats only the whole expression "*"
// as everything), so it matches messages tagged "A" or "*", not all of
// them; " * " is {*} too. Tags may contain spaces and single '|'.
//
// An expression that names no tag and is not "" or "*" — "||", " ", "|| ||"
// — is ErrInvalid: Apache refuses "||" ("subString split error") and is not
// consistent about " " (its proxy matches everything, its broker nothing),
// so neither meaning is guessed. So is one longer than MaxFilterLen.
func ParseFilter(expr string) (Filter, error) {
	if len(expr) > MaxFilterLen {
		return Filter{}, fmt.Errorf("%w: filter of %d bytes exceeds %d", ErrInvalid, len(expr), MaxFilterLen)
	}
	if expr == "" || expr == FilterAll {
		return Filter{}, nil
	}
	var tags []string
	for p := range strings.SplitSeq(expr, "||") {
		if p = javaTrim(p); p != "" {
			tags = append(tags, p)
		}
	}
	if len(tags) == 0 {
		return Filter{}, fmt.Errorf("%w: filter %q names no tag (use \"*\" for every message, \"A || B\" for tags A or B)", ErrInvalid, expr)
	}
	slices.Sort(tags)
	tags = slices.Compact(tags)
	return Filter{expr: strings.Join(tags, "||"), tags: slices.Clip(tags)}, nil
}

// PlainFilter parses expr like ParseFilter, and refuses (ErrInvalid, with
// the reason) the spellings whose meaning surprises: an empty part ("A ||",
// "|| A", "A |||| B"), "*" inside a list ("A || *": a literal tag, not
// everything), a tag with a space, a '|' or a '*' ("A | B", "A B"). Every
// expression it accepts means the same as under ParseFilter. It is the
// grammar of pop.Request.Filter, so that a typo in a host's own request is
// an error instead of a filter that silently settles messages.
func PlainFilter(expr string) (Filter, error) {
	f, err := ParseFilter(expr)
	if err != nil || f.All() {
		return f, err
	}
	for p := range strings.SplitSeq(expr, "||") {
		p = javaTrim(p)
		switch {
		case p == "":
			return Filter{}, fmt.Errorf("%w: filter %q: empty tag (use \"A || B\")", ErrInvalid, expr)
		case p == FilterAll:
			return Filter{}, fmt.Errorf("%w: filter %q: \"*\" must stand alone", ErrInvalid, expr)
		case strings.ContainsAny(p, " \t\r\n|*"):
			return Filter{}, fmt.Errorf("%w: filter %q: tag %q contains a space, '|' or '*' (tags are separated by \"||\")", ErrInvalid, expr, p)
		}
	}
	return f, nil
}

// requestFilter is the filter of req: its TagFilter, or Request.Filter
// parsed by PlainFilter.
func requestFilter(req *Request) (Filter, error) {
	if req.TagFilter == nil {
		return PlainFilter(req.Filter)
	}
	if req.Filter != "" {
		return Filter{}, fmt.Errorf("%w: both Filter %q and TagFilter %q set", ErrInvalid, req.Filter, req.TagFilter.String())
	}
	return *req.TagFilter, nil
}

// javaTrim is Java's String.trim: it removes every leading and trailing
// byte up to ' ' (control characters included), and nothing else.
func javaTrim(s string) string {
	i, j := 0, len(s)
	for i < j && s[i] <= ' ' {
		i++
	}
	for j > i && s[j-1] <= ' ' {
		j--
	}
	return s[i:j]
}

// All reports whether the filter matches every message.
func (f Filter) All() bool { return f.tags == nil }

// Tags returns the filter's tags, sorted and distinct; nil for a filter
// that matches every message. The caller may modify the returned slice.
func (f Filter) Tags() []string { return slices.Clone(f.tags) }

// Match reports whether a message with these tags passes the filter.
func (f Filter) Match(tags string) bool {
	if f.tags == nil {
		return true
	}
	if len(f.tags) <= 8 {
		return slices.Contains(f.tags, tags)
	}
	_, ok := slices.BinarySearch(f.tags, tags)
	return ok
}

// String is the filter in its normal form, as logged: "*" for all, else
// the sorted tags joined by " || " ("* ||" for the literal tag "*" alone).
// ParseFilter of it is an equal Filter.
func (f Filter) String() string {
	if f.tags == nil {
		return FilterAll
	}
	if len(f.tags) == 1 && f.tags[0] == FilterAll {
		return FilterAll + " ||"
	}
	return strings.Join(f.tags, " || ")
}
