package main

import (
	"errors"
	"net/http"

	"github.com/brokercore/brokercore/consumer"
	"github.com/brokercore/brokercore/lock"
	"github.com/brokercore/brokercore/offset"
	"github.com/brokercore/brokercore/pop"
	"github.com/brokercore/brokercore/schedule"
	"github.com/brokercore/brokercore/store"
	"github.com/brokercore/brokercore/txn"
)

// errorTable maps the packages' sentinel errors to HTTP answers. The first
// match wins; anything not listed is a 500 and is logged.
var errorTable = []struct {
	err    error
	status int
	code   string
}{
	{pop.ErrBadHandle, http.StatusNotFound, "bad_handle"},
	{pop.ErrStaleHandle, http.StatusConflict, "stale_handle"},
	// The FIFO pop waited for the group lock and ran out: the client must
	// retry with the SAME attemptId (an empty answer would have made it
	// rotate to a new one and block the queue head).
	{pop.ErrLockTimeout, http.StatusServiceUnavailable, "lock_timeout"},
	{pop.ErrTooManyWaiters, http.StatusServiceUnavailable, "too_many_waiters"},
	{pop.ErrInvalid, http.StatusBadRequest, "bad_request"},
	{offset.ErrStaleEpoch, http.StatusConflict, "stale_epoch"},
	{offset.ErrBeyondEnd, http.StatusBadRequest, "bad_request"},
	{schedule.ErrTimerNotFound, http.StatusNotFound, "unknown_timer"},
	{schedule.ErrDelivered, http.StatusConflict, "timer_delivered"},
	{schedule.ErrCancelled, http.StatusConflict, "timer_cancelled"},
	{offset.ErrInvalid, http.StatusBadRequest, "bad_request"},
	{offset.ErrClosed, http.StatusServiceUnavailable, "shutting_down"},
	{lock.ErrInvalid, http.StatusBadRequest, "bad_request"},
	{consumer.ErrInvalid, http.StatusBadRequest, "bad_request"},
	{schedule.ErrInvalid, http.StatusBadRequest, "bad_request"},
	{txn.ErrNotFound, http.StatusNotFound, "unknown_transaction"},
	{txn.ErrAlreadyResolved, http.StatusConflict, "already_resolved"},
	{txn.ErrUncertain, http.StatusServiceUnavailable, "uncertain"},
	{txn.ErrInvalid, http.StatusBadRequest, "bad_request"},
	{txn.ErrClosed, http.StatusServiceUnavailable, "shutting_down"},
	{store.ErrInvalid, http.StatusBadRequest, "bad_request"},
	{store.ErrOffsetTooSmall, http.StatusBadRequest, "offset_too_small"},
	{store.ErrClosed, http.StatusServiceUnavailable, "shutting_down"},
	{pop.ErrClosed, http.StatusServiceUnavailable, "shutting_down"},
	{schedule.ErrClosed, http.StatusServiceUnavailable, "shutting_down"},
	{consumer.ErrClosed, http.StatusServiceUnavailable, "shutting_down"},
	{lock.ErrClosed, http.StatusServiceUnavailable, "shutting_down"},
}

var (
	// errShuttingDown answers a pop woken because the broker is stopping.
	errShuttingDown = &apiError{Status: http.StatusServiceUnavailable, Message: "broker shutting down", Code: "shutting_down"}
	// errClientGone is for a pop whose client went away: nobody reads it.
	errClientGone = &apiError{Status: statusClientGone, Message: "client closed the request", Code: "client_gone"}
)

// statusClientGone is nginx's "client closed request".
const statusClientGone = 499

func (b *Broker) toAPIError(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	for _, e := range errorTable {
		if errors.Is(err, e.err) {
			return &apiError{Status: e.status, Message: err.Error(), Code: e.code}
		}
	}
	return &apiError{Status: http.StatusInternalServerError, Message: err.Error(), Code: "internal"}
}

// fieldError names the request field a package rejected.
func (b *Broker) fieldError(field string, err error) error {
	ae := b.toAPIError(err)
	if ae.Status == http.StatusBadRequest {
		ae.Field = field
		ae.Message = field + ": " + ae.Message
	}
	return ae
}
