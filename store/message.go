package store

import "time"

// Message is one record of the log. The fields above the line are set by the
// producer; Append assigns the rest.
//
// Ownership: a *Message returned by Read or ReadAt is a fresh copy owned by the
// caller; the store never keeps or mutates it after returning it. A *Message
// passed to Append is read during the call and its assigned fields are filled
// in; the store keeps no reference to it afterwards.
type Message struct {
	Topic          string
	QueueID        int
	Tags           string
	Keys           []string
	Body           []byte
	Properties     map[string]string
	BornAt         time.Time
	ReconsumeTimes int

	// Assigned by Append:

	QueueOffset int64     // 0,1,2,… within (Topic, QueueID)
	LogOffset   int64     // 0,1,2,… across the whole log; unique and increasing
	StoredAt    time.Time // never decreases along the log
}
