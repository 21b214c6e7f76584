package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

const (
	jsStream  = "BENCH"
	jsSubject = "bench"
	jsTimeout = 30 * time.Second
)

// jsNode is an embedded nats-server with JetStream on a directory, reached
// through an in-process connection: no socket, not even loopback.
type jsNode struct {
	srv *server.Server
	nc  *nats.Conn
	js  jetstream.JetStream
}

// startJS starts a server whose file store lives in dir. syncAlways is the
// server's sync_always (every write to a stream's file fsynced before the
// publish is acknowledged); otherwise the default applies: fsync every
// 2 minutes.
func startJS(dir string, syncAlways bool, jsOpts ...jetstream.JetStreamOpt) (*jsNode, error) {
	srv, err := server.NewServer(&server.Options{
		ServerName: "bench",
		DontListen: true,
		JetStream:  true,
		StoreDir:   dir,
		SyncAlways: syncAlways,
		NoLog:      true,
		NoSigs:     true,
	})
	if err != nil {
		return nil, err
	}
	srv.Start()
	if !srv.ReadyForConnections(jsTimeout) {
		srv.Shutdown()
		return nil, errors.New("jetstream: server not ready")
	}
	nc, err := nats.Connect("", nats.InProcessServer(srv))
	if err != nil {
		srv.Shutdown()
		return nil, err
	}
	js, err := jetstream.New(nc, jsOpts...)
	if err != nil {
		nc.Close()
		srv.Shutdown()
		return nil, err
	}
	return &jsNode{srv: srv, nc: nc, js: js}, nil
}

func (n *jsNode) createStream(ctx context.Context) error {
	_, err := n.js.CreateStream(ctx, jetstream.StreamConfig{
		Name: jsStream, Subjects: []string{jsSubject}, Storage: jetstream.FileStorage, Replicas: 1,
	})
	return err
}

// stop closes the connection and shuts the server down, waiting for it.
func (n *jsNode) stop() {
	if n == nil {
		return
	}
	n.nc.Close()
	n.srv.Shutdown()
	n.srv.WaitForShutdown()
}

// fillJS publishes n messages of size bytes asynchronously and waits for
// every ack.
func fillJS(ctx context.Context, node *jsNode, n int64, size int) error {
	body := payload(size)
	for i := int64(0); i < n; i++ {
		if _, err := node.js.PublishAsync(jsSubject, body, jetstream.WithStallWait(jsTimeout)); err != nil {
			return err
		}
	}
	select {
	case <-node.js.PublishAsyncComplete():
	case <-time.After(5 * jsTimeout):
		return errors.New("jetstream: fill did not complete")
	}
	info, err := node.js.Stream(ctx, jsStream)
	if err != nil {
		return err
	}
	if got := int64(info.CachedInfo().State.Msgs); got != n {
		return fmt.Errorf("jetstream: stream holds %d messages, want %d", got, n)
	}
	return nil
}

// jsAsyncCase is JetStream async publish with at most inflight unacked
// publishes, on the default file store (no fsync per message). A latency
// sample is one message from PublishAsync to its PubAck.
func jsAsyncCase(system, ref string, inflight int, n int64) *bcase {
	return &bcase{system: system, ref: ref, op: "publish → PubAck", run: func(e *env) (sample, error) {
		dir, err := e.dir("js")
		if err != nil {
			return sample{}, err
		}
		defer os.RemoveAll(dir)
		sent := make([]time.Time, n)
		lat := make([]time.Duration, n)
		var acked, failed atomic.Int64
		node, err := startJS(dir, false,
			jetstream.WithPublishAsyncMaxPending(inflight),
			jetstream.WithPublishAsyncAckHandler(func(_ jetstream.JetStream, _ *nats.Msg, a *jetstream.PubAck) {
				// A fresh stream with one publisher assigns sequence i+1
				// to the i-th message.
				if i := int64(a.Sequence) - 1; i >= 0 && i < n {
					lat[i] = time.Since(sent[i])
				}
				acked.Add(1)
			}),
			jetstream.WithPublishAsyncErrHandler(func(jetstream.JetStream, *nats.Msg, error) { failed.Add(1) }),
		)
		if err != nil {
			return sample{}, err
		}
		defer node.stop()
		if err := node.createStream(e.ctx); err != nil {
			return sample{}, err
		}
		body := payload(bodySize)
		tm := startTimer()
		for i := range n {
			sent[i] = time.Now()
			if _, err := node.js.PublishAsync(jsSubject, body, jetstream.WithStallWait(jsTimeout)); err != nil {
				return sample{}, err
			}
		}
		select {
		case <-node.js.PublishAsyncComplete():
		case <-time.After(5 * jsTimeout):
			return sample{}, errors.New("jetstream: async publish did not complete")
		}
		el, cpu := tm.stop()
		if f := failed.Load(); f > 0 || acked.Load() != n {
			return sample{}, fmt.Errorf("jetstream: %d acked, %d failed of %d", acked.Load(), f, n)
		}
		return sample{msgs: n, bytes: n * bodySize, elapsed: el, cpu: cpu, lat: lat, disk: dirSize(dir)}, nil
	}}
}

// jsSyncCase is JetStream synchronous publish on a server with sync_always:
// publishers goroutines on one connection, each waiting for its PubAck.
func jsSyncCase(system string, publishers int, n int64, budget time.Duration) *bcase {
	return &bcase{system: system, op: "Publish (fsynced)", run: func(e *env) (sample, error) {
		dir, err := e.dir("js-sync")
		if err != nil {
			return sample{}, err
		}
		defer os.RemoveAll(dir)
		node, err := startJS(dir, true)
		if err != nil {
			return sample{}, err
		}
		defer node.stop()
		if err := node.createStream(e.ctx); err != nil {
			return sample{}, err
		}
		body := payload(bodySize)
		q := newQuota(n, budget)
		var lat latencies
		var done atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, publishers)
		tm := startTimer()
		for range publishers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var mine []time.Duration
				defer func() { lat.add(mine...) }()
				for q.take(1) == 1 {
					t := time.Now()
					if _, err := node.js.Publish(e.ctx, jsSubject, body); err != nil {
						errs <- err
						return
					}
					mine = append(mine, time.Since(t))
					done.Add(1)
				}
			}()
		}
		wg.Wait()
		el, cpu := tm.stop()
		close(errs)
		if err := <-errs; err != nil {
			return sample{}, err
		}
		m := done.Load()
		return sample{msgs: m, bytes: m * bodySize, elapsed: el, cpu: cpu, lat: lat.all, disk: dirSize(dir)}, nil
	}}
}

// jsFetchCase is a JetStream pull consumer over a prefilled stream: fetch 32
// at a time, and with ack, AckExplicit and Ack of every message. Acks are
// fire-and-forget in nats.go, so a run with acks ends when the consumer's
// ack floor has reached the last message: every ack processed by the
// server. Each repetition uses a new durable consumer from the start.
func jsFetchCase(system string, ack bool, n int64) *bcase {
	var (
		node  *jsNode
		dir   string
		round int
	)
	op := "Fetch of 32"
	if ack {
		op += " + 32 Acks"
	}
	c := &bcase{system: system, op: op}
	c.prepare = func(e *env) error {
		var err error
		if dir, err = e.dir("js-fetch"); err != nil {
			return err
		}
		if node, err = startJS(dir, false, jetstream.WithPublishAsyncMaxPending(4096)); err != nil {
			return err
		}
		if err := node.createStream(e.ctx); err != nil {
			return err
		}
		return fillJS(e.ctx, node, n, bodySize)
	}
	c.cleanup = func() {
		node.stop()
		os.RemoveAll(dir)
	}
	c.run = func(e *env) (sample, error) {
		round++
		policy := jetstream.AckNonePolicy
		if ack {
			policy = jetstream.AckExplicitPolicy
		}
		name := fmt.Sprintf("c%d", round)
		cons, err := node.js.CreateOrUpdateConsumer(e.ctx, jsStream, jetstream.ConsumerConfig{
			Durable: name, AckPolicy: policy, DeliverPolicy: jetstream.DeliverAllPolicy,
		})
		if err != nil {
			return sample{}, err
		}
		defer node.js.DeleteConsumer(context.Background(), jsStream, name)
		var lat []time.Duration
		var got int64
		tm := startTimer()
		for got < n {
			t := time.Now()
			// Never ask for more than is left: Fetch would wait out its
			// MaxWait for the missing ones.
			batch, err := cons.Fetch(int(min(32, n-got)), jetstream.FetchMaxWait(jsTimeout))
			if err != nil {
				return sample{}, err
			}
			k := 0
			for m := range batch.Messages() {
				if ack {
					if err := m.Ack(); err != nil {
						return sample{}, err
					}
				}
				k++
			}
			if err := batch.Error(); err != nil {
				return sample{}, err
			}
			if k == 0 {
				return sample{}, fmt.Errorf("jetstream: empty fetch after %d of %d", got, n)
			}
			lat = append(lat, time.Since(t))
			got += int64(k)
		}
		if ack {
			if err := waitAckFloor(e.ctx, cons, uint64(n)); err != nil {
				return sample{}, err
			}
		}
		el, cpu := tm.stop()
		return sample{msgs: got, bytes: got * bodySize, elapsed: el, cpu: cpu, lat: lat}, nil
	}
	return c
}

// waitAckFloor polls the consumer until every message up to seq is acked.
func waitAckFloor(ctx context.Context, cons jetstream.Consumer, seq uint64) error {
	deadline := time.Now().Add(jsTimeout)
	for {
		info, err := cons.Info(ctx)
		if err != nil {
			return err
		}
		if info.AckFloor.Stream >= seq {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("jetstream: ack floor %d, want %d", info.AckFloor.Stream, seq)
		}
		time.Sleep(200 * time.Microsecond)
	}
}

// jsReopenCase times a restart of an embedded server over a stream of n
// messages: from NewServer until the stream reports all n messages through
// the in-process connection.
func jsReopenCase(system string, n int64, size int) *bcase {
	var dir string
	c := &bcase{system: system, op: "server start (recovery included)"}
	c.prepare = func(e *env) error {
		var err error
		if dir, err = e.dir("js-reopen"); err != nil {
			return err
		}
		node, err := startJS(dir, false, jetstream.WithPublishAsyncMaxPending(4096))
		if err != nil {
			return err
		}
		defer node.stop()
		if err := node.createStream(e.ctx); err != nil {
			return err
		}
		return fillJS(e.ctx, node, n, size)
	}
	c.cleanup = func() { os.RemoveAll(dir) }
	c.run = func(e *env) (sample, error) {
		tm := startTimer()
		node, err := startJS(dir, false)
		if err != nil {
			return sample{}, err
		}
		defer node.stop()
		s, err := node.js.Stream(e.ctx, jsStream)
		if err != nil {
			return sample{}, err
		}
		el, cpu := tm.stop()
		if got := int64(s.CachedInfo().State.Msgs); got != n {
			return sample{}, fmt.Errorf("jetstream restart: %d messages, want %d", got, n)
		}
		note := fmt.Sprintf("%d msgs of %d B", n, size)
		return sample{msgs: n, bytes: n * int64(size), elapsed: el, cpu: cpu, lat: []time.Duration{el}, disk: dirSize(dir), note: note}, nil
	}
	return c
}
