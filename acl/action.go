package acl

import (
	"fmt"
	"strings"
)

// Action is a set of operations on a resource, as a bit mask. A rule's
// actions say what it covers; a request names the actions any one of which
// would let it through (a route lookup is Pub|Sub: a producer or a consumer
// may ask).
type Action uint16

// The actions of Apache RocketMQ ACL 2.0. All in a rule covers every action.
const (
	Pub Action = 1 << iota
	Sub
	Create
	Update
	Delete
	Get
	List

	// All is every action above.
	All = Pub | Sub | Create | Update | Delete | Get | List
)

var actionNames = [...]struct {
	a    Action
	name string
}{
	{Pub, "Pub"}, {Sub, "Sub"}, {Create, "Create"}, {Update, "Update"},
	{Delete, "Delete"}, {Get, "Get"}, {List, "List"},
}

// ParseAction reads one action name, case-insensitively as Apache does:
// Pub, Sub, Create, Update, Delete, Get, List or All.
func ParseAction(s string) (Action, error) {
	if strings.EqualFold(s, "All") {
		return All, nil
	}
	for _, n := range actionNames {
		if strings.EqualFold(s, n.name) {
			return n.a, nil
		}
	}
	return 0, fmt.Errorf("acl: action %q (want Pub, Sub, Create, Update, Delete, Get, List or All): %w", s, ErrInvalid)
}

// String names the actions joined by "|", "All" for every action and
// "none" for the empty set.
func (a Action) String() string {
	if a == All {
		return "All"
	}
	if a == 0 {
		return "none"
	}
	var b strings.Builder
	for _, n := range actionNames {
		if a&n.a != 0 {
			if b.Len() > 0 {
				b.WriteByte('|')
			}
			b.WriteString(n.name)
		}
	}
	if rest := a &^ All; rest != 0 {
		if b.Len() > 0 {
			b.WriteByte('|')
		}
		fmt.Fprintf(&b, "0x%x", uint16(rest))
	}
	return b.String()
}

// Decision is the outcome of a rule or of Authorize. The zero value is Deny,
// so a decision nobody made refuses.
type Decision uint8

// Decisions. Deny wins: one matching Deny rule refuses whatever Allow rules
// also match.
const (
	Deny Decision = iota
	Allow
)

// ParseDecision reads "Allow" or "Deny", case-insensitively.
func ParseDecision(s string) (Decision, error) {
	switch {
	case strings.EqualFold(s, "Allow"):
		return Allow, nil
	case strings.EqualFold(s, "Deny"):
		return Deny, nil
	}
	return Deny, fmt.Errorf("acl: decision %q (want Allow or Deny): %w", s, ErrInvalid)
}

// String is "Allow" or "Deny".
func (d Decision) String() string {
	if d == Allow {
		return "Allow"
	}
	return "Deny"
}
