package consumer

import "errors"

// ErrInvalid is returned (wrapped, so errors.Is works) for bad input: an empty
// group, channel id or client id, or a subscription with an empty topic. A
// rejected call changes nothing.
var ErrInvalid = errors.New("consumer: invalid argument")

// ErrClosed is returned (wrapped) by Register, RegisterWithoutSub and
// Unregister after Close. Reads keep answering from memory.
var ErrClosed = errors.New("consumer: registry closed")
