package pop

// grouplock.go is the group@topic serialization lock. It is a logical lock
// whose fields are guarded by the groupTopic mutex, so taking it never
// blocks a goroutine: a contended non-FIFO pop walks away at once, and a
// FIFO retry queues a lockWaiter and sleeps on its channel until the
// releasing holder hands the lock over (no spin, no polling).
//
// Every hold has a token; release and ownership checks compare it, so an
// unlock by a holder that lost the lock can never release someone else's
// hold. The expiry backstop only takes away a hold older than LockExpiry
// whose holder's caller has gone (its ctx is done): a holder still serving
// a live request is never evicted, however slow its read (the failure of
// apache/rocketmq#10750). An evicted holder finds out before it changes
// anything, because it re-checks its token under the mutex.

type lockWaiter struct {
	ch      chan struct{} // closed when the lock is handed to this waiter
	done    <-chan struct{}
	token   uint64
	granted bool
}

type topicLock struct {
	held       bool
	token      uint64
	nextToken  uint64
	since      int64           // when the current hold began (Options.Now)
	holderDone <-chan struct{} // ctx.Done of the current holder's request
	queue      []*lockWaiter
}

func (l *topicLock) grant(now int64, done <-chan struct{}) uint64 {
	l.nextToken++
	l.held, l.token, l.since, l.holderDone = true, l.nextToken, now, done
	return l.token
}

// tryAcquire takes the lock if it is free and nobody queues for it (queued
// FIFO retries go first).
func (l *topicLock) tryAcquire(now int64, done <-chan struct{}) (uint64, bool) {
	if l.held || len(l.queue) > 0 {
		return 0, false
	}
	return l.grant(now, done), true
}

func (l *topicLock) owns(token uint64) bool { return l.held && l.token == token }

// enqueue adds a waiter that will be handed the lock on release.
func (l *topicLock) enqueue(done <-chan struct{}) *lockWaiter {
	w := &lockWaiter{ch: make(chan struct{}), done: done}
	l.queue = append(l.queue, w)
	return w
}

// release frees the hold of token, handing it to the first waiter whose
// request is still live. It returns false for a token that does not hold
// the lock (nothing happens) and whether the lock is now free.
func (l *topicLock) release(token uint64, now int64) (ok, free bool) {
	if !l.owns(token) {
		return false, false
	}
	l.held = false
	return true, l.handOff(now)
}

func (l *topicLock) handOff(now int64) (free bool) {
	for len(l.queue) > 0 {
		w := l.queue[0]
		l.queue[0] = nil
		l.queue = l.queue[1:]
		if isDone(w.done) {
			close(w.ch) // it will find granted == false and give up
			continue
		}
		w.token, w.granted = l.grant(now, w.done), true
		close(w.ch)
		return false
	}
	if len(l.queue) == 0 {
		l.queue = nil
	}
	return true
}

// cancel withdraws a waiter that gave up. If the lock was handed to it in
// the meantime it is released again (handed on); free reports whether the
// lock became free.
func (l *topicLock) cancel(w *lockWaiter, now int64) (free bool) {
	if w.granted {
		_, free = l.release(w.token, now)
		return free
	}
	for i, x := range l.queue {
		if x == w {
			l.queue = append(l.queue[:i], l.queue[i+1:]...)
			break
		}
	}
	if !l.held && len(l.queue) > 0 {
		return l.handOff(now)
	}
	return false
}

// evictAbandoned is the expiry backstop. It frees a hold older than expiry
// only if its holder's request is over; it returns the evicted token.
func (l *topicLock) evictAbandoned(now, expiry int64) (uint64, bool) {
	if !l.held || now-l.since < expiry || !isDone(l.holderDone) {
		return 0, false
	}
	tok := l.token
	l.held = false
	return tok, true
}

func isDone(ch <-chan struct{}) bool {
	if ch == nil {
		return false
	}
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
