package acl

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error this package returns wraps one of them, so
// callers map them with errors.Is: ErrUnauthenticated to the protocols'
// "who are you" codes (gRPC UNAUTHORIZED 40100), ErrDenied to their "not
// allowed" codes (gRPC FORBIDDEN 40300); remoting answers NO_PERMISSION to
// both.
var (
	// ErrInvalid: a configuration, a resource pattern or an argument is
	// malformed. Nothing was changed.
	ErrInvalid = errors.New("acl: invalid")

	// ErrDenied: the user is known (or was authenticated) but no rule
	// allows the action on the resource, or a Deny rule refuses it. The
	// error is a *DeniedError naming user, resource and action.
	ErrDenied = errors.New("acl: denied")

	// ErrUnknownUser: no user has this access key. Wrapped with ErrDenied
	// by Authorize and with ErrUnauthenticated by the signature checks.
	ErrUnknownUser = errors.New("acl: unknown user")

	// ErrExists: an edit adds a user that is already there.
	ErrExists = errors.New("acl: already exists")

	// ErrNotFound: an edit names a user that is not there.
	ErrNotFound = errors.New("acl: not found")

	// ErrUnauthenticated: a request's credentials do not prove who sent
	// it. More precise causes below wrap it.
	ErrUnauthenticated = errors.New("acl: unauthenticated")

	// ErrNoCredentials: the request carries no signature at all.
	ErrNoCredentials = fmt.Errorf("%w: no credentials", ErrUnauthenticated)

	// ErrDisabled: the user exists but is disabled (UserConfig.Disabled).
	ErrDisabled = fmt.Errorf("%w: user disabled", ErrUnauthenticated)

	// ErrMalformed: the signature header or fields cannot be parsed.
	ErrMalformed = fmt.Errorf("%w: malformed credentials", ErrUnauthenticated)

	// ErrBadSignature: the signature does not match the user's secret.
	ErrBadSignature = fmt.Errorf("%w: signature mismatch", ErrUnauthenticated)

	// ErrClockSkew: the signed time is further from the broker's clock than
	// Options.MaxSkew allows (too old, or from the future).
	ErrClockSkew = fmt.Errorf("%w: signed time outside the clock-skew window", ErrUnauthenticated)

	// ErrReplay: the same signature was first seen longer ago than
	// Options.ReplayWindow: a recorded request played again.
	ErrReplay = fmt.Errorf("%w: replayed signature", ErrUnauthenticated)
)

// DeniedError is the error of a refused Authorize. It matches ErrDenied,
// and ErrUnknownUser too when the user does not exist.
type DeniedError struct {
	User     string
	Resource Resource
	Action   Action
	IP       string // the source address, "" when unknown
	Reason   string // "no rule allows it", "denied by rule 3", "unknown user"
	unknown  bool
}

func (e *DeniedError) Error() string {
	ip := ""
	if e.IP != "" {
		ip = " from " + e.IP
	}
	return fmt.Sprintf("acl: user %q may not %s %s%s: %s", e.User, e.Action, e.Resource, ip, e.Reason)
}

// Is reports ErrDenied, and ErrUnknownUser for a user that does not exist.
func (e *DeniedError) Is(target error) bool {
	return target == ErrDenied || (e.unknown && target == ErrUnknownUser)
}
