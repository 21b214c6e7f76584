package pop

// grouplock.go is the group@topic serialization lock as plain state: no
// channel, no context, no clock. Its fields are guarded by the groupTopic
// mutex, so taking it never blocks a goroutine: a contended non-FIFO pop
// walks away at once, and a FIFO retry queues a lockWaiter; the driver
// (lockwait.go) sleeps it on a channel of its own until a release hands
// the lock over to it (no spin, no polling).
//
// Every hold has a token; release and ownership checks compare it, so an
// unlock by a holder that lost the lock can never release someone else's
// hold. The expiry backstop only takes away a hold older than LockExpiry
// whose holder's caller has gone (the driver marks it abandoned when the
// request's ctx ends): a holder still serving a live request is never
// evicted, however slow its read (the failure of apache/rocketmq#10750).
// An evicted holder finds out before it changes anything, because it
// re-checks its token under the mutex.

// lockWaiter is a FIFO retry queued for the lock.
type lockWaiter struct {
	token   uint64
	granted bool
}

type topicLock struct {
	held      bool
	token     uint64
	nextToken uint64
	since     int64 // when the current hold began (Options.Now)
	abandoned bool  // the current holder's request is over
	queue     []*lockWaiter
}

func (l *topicLock) grant(now int64) uint64 {
	l.nextToken++
	l.held, l.token, l.since, l.abandoned = true, l.nextToken, now, false
	return l.token
}

// tryAcquire takes the lock if it is free and nobody queues for it (queued
// FIFO retries go first).
func (l *topicLock) tryAcquire(now int64) (uint64, bool) {
	if l.held || len(l.queue) > 0 {
		return 0, false
	}
	return l.grant(now), true
}

func (l *topicLock) owns(token uint64) bool { return l.held && l.token == token }

// enqueue adds a waiter that will be handed the lock on release.
func (l *topicLock) enqueue() *lockWaiter {
	w := &lockWaiter{}
	l.queue = append(l.queue, w)
	return w
}

// abandon records that the holder of token has no caller any more: the
// backstop may now take its hold away once it is old enough.
func (l *topicLock) abandon(token uint64) {
	if l.owns(token) {
		l.abandoned = true
	}
}

// release frees the hold of token, handing it to the first waiter. It
// returns false for a token that does not hold the lock (nothing happens),
// whether the lock is now free, and the waiter it was handed to (nil if
// none): the driver wakes it.
func (l *topicLock) release(token uint64, now int64) (ok, free bool, to *lockWaiter) {
	if !l.owns(token) {
		return false, false, nil
	}
	l.held = false
	free, to = l.handOff(now)
	return true, free, to
}

// handOff gives a free lock to the first waiter, if any.
func (l *topicLock) handOff(now int64) (free bool, to *lockWaiter) {
	if len(l.queue) == 0 {
		l.queue = nil
		return true, nil
	}
	w := l.queue[0]
	l.queue[0] = nil
	l.queue = l.queue[1:]
	w.token, w.granted = l.grant(now), true
	return false, w
}

// cancel withdraws a waiter that gave up. If the lock was handed to it in
// the meantime it is released again (handed on); free reports whether the
// lock became free, to the waiter it was handed to.
func (l *topicLock) cancel(w *lockWaiter, now int64) (free bool, to *lockWaiter) {
	if w.granted {
		_, free, to = l.release(w.token, now)
		return free, to
	}
	for i, x := range l.queue {
		if x == w {
			l.queue = append(l.queue[:i], l.queue[i+1:]...)
			break
		}
	}
	if !l.held {
		return l.handOff(now)
	}
	return false, nil
}

// evictAbandoned is the expiry backstop. It frees a hold older than expiry
// only if its holder's request is over; it returns the evicted token.
func (l *topicLock) evictAbandoned(now, expiry int64) (uint64, bool) {
	if !l.held || now-l.since < expiry || !l.abandoned {
		return 0, false
	}
	tok := l.token
	l.held = false
	return tok, true
}
