package consumer

import "errors"

// ErrInvalid is returned (wrapped, so errors.Is works) for bad input: an empty
// group, channel id or client id, or a subscription with an empty topic. A
// rejected call changes nothing.
var ErrInvalid = errors.New("consumer: invalid argument")
