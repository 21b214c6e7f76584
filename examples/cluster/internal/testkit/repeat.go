package testkit

import "sync"

// Repeat calls fn over and over on a goroutine of its own until the
// returned stop is called; stop waits for the call in progress to return
// and is safe to call more than once. Tests use it for the load that runs
// beside what they check (appends during reads, noise during a poll).
func Repeat(fn func()) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			fn()
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() { close(done) })
		wg.Wait()
	}
}
