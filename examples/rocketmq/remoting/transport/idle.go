package transport

import "time"

// touch records activity on the connection (a read or a write).
func (c *Conn) touch() { c.lastActive.Store(c.srv.opts.Now().UnixNano()) }

// idle reports whether c has had no read, no write and no request in
// service since cutoff.
func (c *Conn) idle(cutoff int64) bool {
	return c.lastActive.Load() < cutoff && len(c.sem) == 0
}

// startSweeper starts the goroutine that closes idle connections (the
// server's wg owns it; Close stops it).
func (s *Server) startSweeper() {
	if s.opts.IdleTimeout <= 0 {
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(s.opts.idleCheck())
		defer t.Stop()
		for {
			select {
			case <-s.ctx.Done():
				return
			case <-t.C:
				s.sweepIdle()
			}
		}
	}()
}

// sweepIdle closes every connection idle for IdleTimeout (Apache's broker
// closes a channel with neither read nor write for 120 s) and returns how
// many.
func (s *Server) sweepIdle() int {
	cutoff := s.opts.Now().Add(-s.opts.IdleTimeout).UnixNano()
	var idle []*Conn
	s.mu.Lock()
	for c := range s.conns {
		if c.idle(cutoff) {
			idle = append(idle, c)
		}
	}
	s.mu.Unlock()
	for _, c := range idle {
		s.idleClosed.Add(1)
		s.log.Info("closing idle connection", "client", c.nc.RemoteAddr().String(), "channel", c.id,
			"idle_timeout", s.opts.IdleTimeout)
		c.nc.Close()
	}
	return len(idle)
}
