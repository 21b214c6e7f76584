package brokercore

import "errors"

// ErrInvalidConfig is returned (wrapped) by the constructors for a Config they
// cannot work with: neither Dir nor Store, both, a Subscriber over a Store
// without its Pop service, or an out-of-range number.
var ErrInvalidConfig = errors.New("brokercore watermill: invalid config")

// ErrPublisherClosed is returned (wrapped) by Publish after Close.
var ErrPublisherClosed = errors.New("brokercore watermill: publisher closed")

// ErrSubscriberClosed is returned (wrapped) by Subscribe after Close.
var ErrSubscriberClosed = errors.New("brokercore watermill: subscriber closed")

// ErrInvalidTopic is returned (wrapped) by Publish and Subscribe for an empty
// topic.
var ErrInvalidTopic = errors.New("brokercore watermill: invalid topic")
