// Package embedtest shows how to embed brokercore in a Go unit test: no
// server, no network, no config file — a whole broker core in t.TempDir(),
// on a clock the test moves instead of sleeping.
//
// The recipe, in embedtest_test.go, is one call to brokertest.New:
//
//	clk := brokertest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
//	b := brokertest.New(t, brokertest.WithClock(clk)) // closed by t.Cleanup
//	_ = b.Store().Append(&store.Message{Topic: "orders", Body: []byte("order 1")})
//	res, _ := b.Pop().Pop(ctx, pop.Request{Group: "billing", Topic: "orders", ClientID: "test"})
//	clk.Advance(pop.DefaultInvisible) // an unacked message comes back, without a sleep
//
// brokertest.New is brokercore.Open in a temporary directory with
// store.SyncNone (nothing has to survive a power cut in a test, and it
// keeps it fast) and a short scheduler tick, so delayed messages follow a
// clock move within milliseconds. The broker is wired as in production:
// appends wake long polls, acks commit offsets, the scheduler is started.
// Under testing/synctest, leave the clock out: see package brokertest.
//
// A test that wants only some pieces composes them itself, as Example does:
// the store and a pop service over it (pop.New subscribes to the store's
// arrivals itself, so long polls wake with nothing to wire).
//
// The package has no non-test code: it is documentation that compiles and
// runs with `go test ./examples/embedtest`.
package embedtest
