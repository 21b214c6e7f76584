package brokercore

import "errors"

var (
	// ErrInvalid reports a bad argument to Open (an empty directory name).
	// Nothing was created.
	ErrInvalid = errors.New("brokercore: invalid argument")
	// ErrCorrupt reports a damaged file of the broker's own under its
	// directory (the receipt-handle key). Open refuses to replace it
	// silently: handles signed with the old key would stop verifying.
	ErrCorrupt = errors.New("brokercore: corrupt file")
)
