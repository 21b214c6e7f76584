package acl

import (
	"fmt"
	"strings"
)

// Kind is the type of a resource.
type Kind uint8

// Resource kinds. AnyKind appears only in rules (the pattern "*").
const (
	AnyKind Kind = iota
	TopicKind
	GroupKind
)

// String is "Topic", "Group" or "*".
func (k Kind) String() string {
	switch k {
	case TopicKind:
		return "Topic"
	case GroupKind:
		return "Group"
	}
	return "*"
}

// The prefixes RocketMQ gives a group's retry and dead-letter topics; a
// Group resource named with one of them is that group.
const (
	retryPrefix = "%RETRY%"
	dlqPrefix   = "%DLQ%"
)

// Resource is what a request touches: a topic or a consumer group. Build
// it with Topic or Group.
type Resource struct {
	Kind Kind
	Name string
}

// Topic is the resource of a topic.
func Topic(name string) Resource { return Resource{Kind: TopicKind, Name: name} }

// Group is the resource of a consumer group. A name of the group's retry or
// dead-letter topic (%RETRY%G, %DLQ%G) is the group G, as in Apache, so
// that a consumer's own retries need only its group.
func Group(name string) Resource {
	name = strings.TrimPrefix(name, retryPrefix)
	name = strings.TrimPrefix(name, dlqPrefix)
	return Resource{Kind: GroupKind, Name: name}
}

// TopicOrGroup is the resource a request on topic means: the group for a
// retry topic (%RETRY%G), the topic otherwise.
func TopicOrGroup(topic string) Resource {
	if strings.HasPrefix(topic, retryPrefix) {
		return Group(topic)
	}
	return Topic(topic)
}

// String is the Apache resource key: "Topic:orders", "Group:billing".
func (r Resource) String() string { return r.Kind.String() + ":" + r.Name }

// pattern is a compiled resource pattern of a rule.
type pattern struct {
	kind   Kind   // AnyKind: every resource of every kind
	name   string // literal name, or the prefix when prefix is set
	prefix bool   // name ends with "*": every name starting with name
	any    bool   // "Kind:*": every resource of that kind
}

// parsePattern reads "*", "Topic:*", "Topic:orders-*" or "Topic:orders"
// (and the same for Group). The kind is case-insensitive; a "*" anywhere
// but at the end of the name is refused.
func parsePattern(s string) (pattern, error) {
	if s == "*" {
		return pattern{kind: AnyKind, any: true}, nil
	}
	kindS, name, ok := strings.Cut(s, ":")
	if !ok {
		return pattern{}, fmt.Errorf("acl: resource %q (want \"*\", \"Topic:name\" or \"Group:name\"): %w", s, ErrInvalid)
	}
	var p pattern
	switch {
	case strings.EqualFold(kindS, "Topic"):
		p.kind = TopicKind
	case strings.EqualFold(kindS, "Group"):
		p.kind = GroupKind
	default:
		return pattern{}, fmt.Errorf("acl: resource %q: kind %q (want Topic or Group): %w", s, kindS, ErrInvalid)
	}
	switch {
	case name == "*":
		p.any = true
		return p, nil
	case name == "":
		return pattern{}, fmt.Errorf("acl: resource %q: empty name: %w", s, ErrInvalid)
	case strings.IndexByte(name, '*') >= 0 && strings.IndexByte(name, '*') != len(name)-1:
		return pattern{}, fmt.Errorf("acl: resource %q: \"*\" only at the end of a name: %w", s, ErrInvalid)
	case strings.HasSuffix(name, "*"):
		p.prefix, p.name = true, strings.TrimSuffix(name, "*")
	default:
		p.name = name
	}
	if p.kind == GroupKind {
		p.name = Group(p.name).Name
	}
	return p, nil
}

func (p pattern) match(r Resource) bool {
	if p.kind == AnyKind {
		return true
	}
	if p.kind != r.Kind {
		return false
	}
	switch {
	case p.any:
		return true
	case p.prefix:
		return strings.HasPrefix(r.Name, p.name)
	}
	return r.Name == p.name
}

func (p pattern) String() string {
	switch {
	case p.kind == AnyKind:
		return "*"
	case p.any:
		return p.kind.String() + ":*"
	case p.prefix:
		return p.kind.String() + ":" + p.name + "*"
	}
	return p.kind.String() + ":" + p.name
}
