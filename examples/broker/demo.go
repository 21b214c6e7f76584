package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"
)

// apiClient is a tiny client of the broker's API; the demo and the tests
// speak HTTP through it like any other client would.
type apiClient struct {
	base string
	hc   *http.Client
}

// call sends in as JSON (nil: no body) and decodes a 200 answer into out. A
// non-2xx answer comes back as *apiError with its status.
func (c *apiClient) call(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		buf, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(buf)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		ae := &apiError{}
		if jerr := json.Unmarshal(raw, ae); jerr != nil {
			ae.Message = string(raw)
		}
		ae.Status = resp.StatusCode
		return ae
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(raw, out)
}

// runDemo starts a broker in a temporary directory on a loopback port and
// walks through the main features over HTTP, printing each step to out. It
// takes about a second (delay level 1 is 1 s).
func runDemo(ctx context.Context, out io.Writer, logger *slog.Logger) (err error) {
	dir, err := os.MkdirTemp("", "brokercore-demo-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	// The demo's own story goes to out; the packages only log warnings.
	quiet := slog.New(slog.DiscardHandler)
	if logger != nil {
		quiet = slog.New(&levelFilter{min: slog.LevelWarn, Handler: logger.Handler()})
	}
	b, err := newBroker(Config{DataDir: dir, Logger: quiet})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return errors.Join(err, b.Close())
	}
	srv := b.NewServer(ln.Addr().String())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	transport := &http.Transport{}
	defer func() {
		transport.CloseIdleConnections()
		sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		err = errors.Join(err, b.Shutdown(sctx, srv))
		if serr := <-served; !errors.Is(serr, http.ErrServerClosed) {
			err = errors.Join(err, serr)
		}
	}()
	c := &apiClient{base: "http://" + ln.Addr().String(), hc: &http.Client{Transport: transport, Timeout: 30 * time.Second}}
	return demoTour(ctx, c, out)
}

func demoTour(ctx context.Context, c *apiClient, out io.Writer) error {
	say := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }
	const topic, group = "demo-orders", "demo-group"
	say("brokercore demo: a broker on %s, data in a temporary directory", c.base)
	start := time.Now()

	// 1. Produce a batch: one atomic append.
	var batch batchOut
	err := c.call(ctx, "POST", "/v1/messages/batch", batchIn{Messages: []messageIn{
		{Topic: topic, Keys: []string{"order-1"}, Tags: "created", Body: ptr("order 1 created")},
		{Topic: topic, Keys: []string{"order-1"}, Tags: "paid", Body: ptr("order 1 paid")},
		{Topic: topic, Keys: []string{"order-1"}, Tags: "shipped", Body: ptr("order 1 shipped")},
	}}, &batch)
	if err != nil {
		return fmt.Errorf("produce batch: %w", err)
	}
	for _, p := range batch.Messages {
		say("1. produced %s queue %d offset %d", p.Topic, p.QueueID, *p.QueueOffset)
	}

	// 2. Delayed produce: level 1 (1 s) goes through the schedule topic.
	var delayed produced
	if err := c.call(ctx, "POST", "/v1/messages", messageIn{
		Topic: topic, Keys: []string{"order-1"}, Tags: "reminder", Body: ptr("order 1: ask for a review"), DelayLevel: 1,
	}, &delayed); err != nil {
		return fmt.Errorf("delayed produce: %w", err)
	}
	say("2. produced a delayed message (level 1), due at %s", delayed.DeliverAt.Format(time.TimeOnly))

	// 3. FIFO pop with an attemptId, as an orderly consumer does.
	pop := func(attempt string, max int, poll string) (popOut, error) {
		var res popOut
		q := 0
		err := c.call(ctx, "POST", "/v1/pop", popIn{
			Group: group, Topic: topic, ClientID: "demo-client", QueueID: &q,
			Max: max, Invisible: "30s", Poll: poll, FIFO: true, AttemptID: attempt,
		}, &res)
		return res, err
	}
	first, err := pop("attempt-1", 2, "")
	if err != nil {
		return fmt.Errorf("fifo pop: %w", err)
	}
	say("3. FIFO pop (attemptId attempt-1) got %s", describe(first))

	// 4. The answer was "lost": the client retries with the same attemptId
	//    and gets the same batch with fresh handles.
	again, err := pop("attempt-1", 2, "")
	if err != nil {
		return fmt.Errorf("fifo re-pop: %w", err)
	}
	say("4. retry with the same attemptId got the same batch again: %s", describe(again))
	if len(first.Messages) > 0 {
		err := c.call(ctx, "POST", "/v1/ack", ackIn{Handle: first.Messages[0].Handle}, nil)
		var ae *apiError
		if errors.As(err, &ae) {
			say("   acking with the first attempt's handle: HTTP %d %s (the old handle is stale)", ae.Status, ae.Code)
		}
	}

	// 5. Another attemptId finds the queue blocked until the batch is acked.
	blocked, err := pop("attempt-2", 2, "")
	if err != nil {
		return fmt.Errorf("fifo pop while blocked: %w", err)
	}
	say("5. a pop with attemptId attempt-2 while the batch is unacked got %d messages (queue blocked)", len(blocked.Messages))

	// 6. Ack the batch; the queue moves on.
	for _, d := range again.Messages {
		if err := c.call(ctx, "POST", "/v1/ack", ackIn{Handle: d.Handle}, nil); err != nil {
			return fmt.Errorf("ack: %w", err)
		}
	}
	say("6. acked offsets %v", offsets(again))
	next, err := pop("attempt-2", 2, "")
	if err != nil {
		return fmt.Errorf("fifo pop after ack: %w", err)
	}
	say("   attempt-2 now got %s", describe(next))
	if err := ackAll(ctx, c, next); err != nil {
		return err
	}

	// 7. Long poll for the delayed message.
	t0 := time.Now()
	late, err := pop("attempt-3", 1, "10s")
	if err != nil {
		return fmt.Errorf("long poll: %w", err)
	}
	say("7. a long poll waited %s and got %s", time.Since(t0).Round(10*time.Millisecond), describe(late))
	if err := ackAll(ctx, c, late); err != nil {
		return err
	}
	var off offsetOut
	if err := c.call(ctx, "GET", "/v1/offsets?group="+group+"&topic="+topic+"&queueId=0", nil, &off); err != nil {
		return fmt.Errorf("query offset: %w", err)
	}
	say("   committed offset %d of %d, lag %d", deref(off.Committed), off.MaxOffset, off.Lag)

	// 8. Reset by time to before the first produce: everything comes back.
	var reset resetOut
	if err := c.call(ctx, "POST", "/v1/offsets/reset", resetIn{
		Group: group, Topic: topic, Time: start.Add(-time.Second).Format(time.RFC3339Nano),
	}, &reset); err != nil {
		return fmt.Errorf("reset by time: %w", err)
	}
	for _, r := range reset.Resets {
		say("8. reset %s queue %d by time to offset %d (epoch %d)", r.Topic, r.QueueID, deref(r.Committed), r.Epoch)
	}
	replay, err := pop("attempt-4", 32, "")
	if err != nil {
		return fmt.Errorf("pop after reset: %w", err)
	}
	say("   the next pop replays %s", describe(replay))
	if err := ackAll(ctx, c, replay); err != nil {
		return err
	}

	var st struct { // the keys of /v1/stats are snake_case
		Store struct {
			Messages uint64 `json:"messages"`
		} `json:"store"`
		Pop struct {
			Delivered uint64 `json:"delivered"`
			Acks      uint64 `json:"acks"`
		} `json:"pop"`
		ScheduleProgress map[string]int64 `json:"schedule_progress"`
		HTTP             HTTPStats        `json:"http"`
	}
	if err := c.call(ctx, "GET", "/v1/stats", nil, &st); err != nil {
		return fmt.Errorf("stats: %w", err)
	}
	say("9. stats: store appended %d messages; pop delivered %d and took %d acks; delay level 1 delivered up to offset %d; %d HTTP requests",
		st.Store.Messages, st.Pop.Delivered, st.Pop.Acks, st.ScheduleProgress["1"], st.HTTP.Requests)
	say("demo done in %s", time.Since(start).Round(10*time.Millisecond))
	return nil
}

func ackAll(ctx context.Context, c *apiClient, res popOut) error {
	for _, d := range res.Messages {
		if err := c.call(ctx, "POST", "/v1/ack", ackIn{Handle: d.Handle}, nil); err != nil {
			return fmt.Errorf("ack offset %d: %w", d.QueueOffset, err)
		}
	}
	return nil
}

func describe(res popOut) string {
	if len(res.Messages) == 0 {
		return "nothing"
	}
	s := ""
	for i, d := range res.Messages {
		if i > 0 {
			s += ", "
		}
		body := ""
		if d.Body != nil {
			body = *d.Body
		}
		s += fmt.Sprintf("#%d %q (attempt %d)", d.QueueOffset, body, d.Attempts)
	}
	return s
}

func offsets(res popOut) []int64 {
	var o []int64
	for _, d := range res.Messages {
		o = append(o, d.QueueOffset)
	}
	return o
}

func ptr[T any](v T) *T { return &v }

func deref(p *int64) int64 {
	if p == nil {
		return -1
	}
	return *p
}

// levelFilter passes only records at or above min.
type levelFilter struct {
	min slog.Level
	slog.Handler
}

func (f *levelFilter) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= f.min && f.Handler.Enabled(ctx, l)
}

func (f *levelFilter) WithAttrs(as []slog.Attr) slog.Handler {
	return &levelFilter{min: f.min, Handler: f.Handler.WithAttrs(as)}
}

func (f *levelFilter) WithGroup(name string) slog.Handler {
	return &levelFilter{min: f.min, Handler: f.Handler.WithGroup(name)}
}
