// Package acl is protocol-neutral access control in the style of Apache
// RocketMQ ACL 2.0 (RIP-68): users with an access key and a secret, rules
// per resource and action, and the signature checks of RocketMQ's two
// client protocols. A host authenticates a request with the check of its
// protocol, then asks Authorize for each resource the request touches, and
// maps the errors to its protocol's codes.
//
// # Model
//
// A user has an access key (its name), a secret and optionally the super
// user flag, which allows everything. A rule names a user, resources,
// actions, a decision and optionally source address ranges. Resources are
// "Topic:orders" (literal), "Topic:orders-*" (prefix), "Topic:*" (every
// topic), the same for "Group:", and "*" (everything). A group's retry
// and dead-letter topics (%RETRY%G, %DLQ%G) are the group G. Actions are
// Pub, Sub, Create, Update, Delete, Get, List and All.
//
// # Decisions
//
// Authorize is a pure function of the current configuration and its
// arguments. A super user is allowed. Otherwise each requested action is
// decided on its own: denied if any matching rule (resource, action and
// source all match) says Deny, allowed if a matching rule says Allow, and
// denied when no rule matches. A request naming several actions (Pub|Sub)
// passes when any one of them is allowed. Deny wins regardless of how
// specific the rules are: this differs from Apache, where the most specific
// matching resource decides first and Deny wins only between equally
// specific ones. A Deny on "Topic:*" here cannot be punched through by an
// Allow on "Topic:orders".
//
// Source ranges: a rule with sourceIps applies only to requests from those
// ranges. When the caller does not know the address (the zero netip.Addr)
// Deny rules with ranges apply and Allow rules with ranges do not.
//
// # Authentication
//
// Both checks are pure functions (SignV5/VerifyV5, SignRemoting/
// VerifyRemoting) plus Authorizer methods that look the user up, keep
// keyed HMAC states and count:
//
//   - v5 gRPC: the authorization header "MQv2-HMAC-SHA1
//     Credential=<ak>//Rocketmq, SignedHeaders=x-mq-date-time,
//     Signature=<hex>", the hex HMAC-SHA1 of the x-mq-date-time value.
//     AuthenticateV5 refuses a signed time more than Options.MaxSkew away
//     from the broker's clock, and a signature first verified longer than
//     Options.ReplayWindow ago: a client signs with the current second, so
//     its calls within one second share a signature, and a copy recorded
//     and played back later is refused.
//   - remoting: the AccessKey and Signature ext fields, the base64
//     HMAC-SHA1 over the values of all other fields sorted by name, then
//     the body. Remoting requests carry no signed time, so a captured
//     request can be replayed as it is (as with Apache); only TLS prevents
//     that. A SecurityToken field is signed like the others and otherwise
//     ignored, as Apache 5.3 does; rocketmq-client-go/v2 sends it
//     unsigned, so its requests with a token are refused (by Apache too),
//     with an error saying so.
//
// # Configuration
//
// Config is a JSON document (see Config for the format), read by Parse or
// Load. Reload and ReloadFile swap a new one in atomically; a bad one is
// refused and the old rules stay. Edit changes the configuration in force
// (Config.AddUser, PutRule, RemoveRules, …), checked and committed (a
// host writes its file with Config.Marshal) before it takes effect. Nothing is cached across a reload that
// it could change: decisions are made afresh on every call, and a cached
// v5 verification is checked again when the user's secret changed.
//
// # Defaults
//
//   - DefaultMaxSkew (15 min), DefaultReplayWindow (5 s),
//     DefaultReplayCacheSize (131072 signatures), MaxConfigSize (4 MiB).
//   - Options.Now nil means time.Now; Options.Logger nil discards.
package acl
