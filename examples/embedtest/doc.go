// Package embedtest shows how to embed brokercore's store and pop service
// in a Go unit test: no server, no network, no config file — a log in
// t.TempDir(), a pop.Service over it, and an injected clock so that
// invisible times pass without sleeping.
//
// The recipe, in embedtest_test.go:
//
//	st, err := store.Open(t.TempDir(), store.Options{Sync: store.SyncNone, Now: clock.Now,
//		OnAppend: func(topic string, q int, _ int64) { svc.Arrived(topic, q) }})
//	svc := pop.New(st, pop.Options{Now: clock.Now})
//	t.Cleanup(func() { svc.Close(); st.Close() })
//
// SyncNone is fine in a test (nothing has to survive a power cut) and keeps
// it fast. The store is opened before the service exists, so OnAppend
// reaches the service through a variable set right after pop.New; close the
// service before the store. pop.Options.Offsets left nil keeps committed
// offsets in memory; pass an *offset.Manager to persist them.
//
// The package has no non-test code: it is documentation that compiles and
// runs with `go test ./examples/embedtest`.
package embedtest
