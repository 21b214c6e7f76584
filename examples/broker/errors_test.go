package main

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/brokercore/brokercore/consumer"
	"github.com/brokercore/brokercore/lock"
	"github.com/brokercore/brokercore/offset"
	"github.com/brokercore/brokercore/pop"
	"github.com/brokercore/brokercore/schedule"
	"github.com/brokercore/brokercore/store"
)

// TestPackageErrorsMapToTheDocumentedStatus pins the README's error table,
// including the cases an HTTP test cannot provoke on demand (a FIFO
// retry's lock timeout).
func TestPackageErrorsMapToTheDocumentedStatus(t *testing.T) {
	b := &Broker{}
	for _, tc := range []struct {
		err    error
		status int
		code   string
	}{
		{pop.ErrBadHandle, http.StatusNotFound, "bad_handle"},
		{pop.ErrStaleHandle, http.StatusConflict, "stale_handle"},
		{fmt.Errorf("pop g@t attempt %q: %w: %w", "a", pop.ErrLockTimeout, context.DeadlineExceeded), http.StatusServiceUnavailable, "lock_timeout"},
		{pop.ErrTooManyWaiters, http.StatusServiceUnavailable, "too_many_waiters"},
		{pop.ErrClosed, http.StatusServiceUnavailable, "shutting_down"},
		{pop.ErrInvalid, http.StatusBadRequest, "bad_request"},
		{offset.ErrStaleEpoch, http.StatusConflict, "stale_epoch"},
		{store.ErrInvalid, http.StatusBadRequest, "bad_request"},
		{store.ErrClosed, http.StatusServiceUnavailable, "shutting_down"},
		{schedule.ErrClosed, http.StatusServiceUnavailable, "shutting_down"},
		{consumer.ErrClosed, http.StatusServiceUnavailable, "shutting_down"},
		{lock.ErrClosed, http.StatusServiceUnavailable, "shutting_down"},
		{schedule.ErrTimerNotFound, http.StatusNotFound, "unknown_timer"},
		{offset.ErrBeyondEnd, http.StatusBadRequest, "bad_request"},
		{store.ErrFailed, http.StatusInternalServerError, "internal"},
		{badField("max", "too big"), http.StatusBadRequest, "bad_request"},
	} {
		ae := b.toAPIError(fmt.Errorf("wrapped: %w", tc.err))
		assert.Equal(t, tc.status, ae.Status, "%v", tc.err)
		assert.Equal(t, tc.code, ae.Code, "%v", tc.err)
	}
}
