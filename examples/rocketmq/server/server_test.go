package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/brokercore/brokercore/examples/rocketmq/server"
	"github.com/brokercore/brokercore/pop"
	"github.com/brokercore/brokercore/store"
	"github.com/stretchr/testify/require"
)

func start(t *testing.T, cfg server.Config) *server.Server {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	for _, a := range []*string{&cfg.NameSrvAddr, &cfg.BrokerAddr, &cfg.MetricsAddr} {
		if *a == "" {
			*a = "127.0.0.1:0"
		}
	}
	s, err := server.Start(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

func get(t *testing.T, u string) (int, string) {
	t.Helper()
	resp, err := http.Get(u)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func post(t *testing.T, u string) (int, string) {
	t.Helper()
	resp, err := http.Post(u, "", nil)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestMetricsExportEveryPackagesStats(t *testing.T) {
	s := start(t, server.Config{})
	require.NoError(t, s.Core().Store().Append(&store.Message{Topic: "t", Body: []byte("x")}))
	code, body := get(t, "http://"+s.MetricsAddr()+"/metrics")
	require.Equal(t, http.StatusOK, code)
	for _, m := range []string{"rocketmq_store_messages_total 1", "rocketmq_offset_commits_total", "rocketmq_lock_locked_total",
		"rocketmq_consumer_groups", "rocketmq_pop_", "rocketmq_schedule_running 1", "rocketmq_broker_sent_total",
		"rocketmq_remoting_broker_accepted_total", "rocketmq_schedule_level_delivered_total{level=\"1\"}", "go_goroutines"} {
		require.Contains(t, body, m)
	}
}

func TestAdminResetByOffsetAndTimeAndBadInput(t *testing.T) {
	s := start(t, server.Config{})
	n, err := s.Topics().Ensure("t", 2)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	st := s.Core().Store()
	for i := 0; i < 10; i++ {
		require.NoError(t, st.Append(&store.Message{Topic: "t", QueueID: i % 2, Body: []byte("x")}))
	}
	cut := time.Now()
	time.Sleep(5 * time.Millisecond)
	require.NoError(t, st.Append(&store.Message{Topic: "t", QueueID: 0, Body: []byte("y")}))
	base := "http://" + s.MetricsAddr() + "/admin/reset?group=g&topic=t"

	code, body := post(t, base+"&offset=3")
	require.Equal(t, http.StatusOK, code, body)
	var out struct {
		Queues []struct {
			Queue  int    `json:"queue"`
			Offset int64  `json:"offset"`
			Epoch  uint64 `json:"epoch"`
		} `json:"queues"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &out))
	require.Len(t, out.Queues, 2)
	for q := 0; q < 2; q++ {
		off, ok := s.Core().Offsets().Committed("g", "t", q)
		require.True(t, ok)
		require.Equal(t, int64(3), off)
		require.NotZero(t, s.Core().Offsets().Epoch("g", "t", q))
	}
	code, body = post(t, base+"&queue=0&time="+url.QueryEscape(cut.Format(time.RFC3339Nano)))
	require.Equal(t, http.StatusOK, code, body)
	off, _ := s.Core().Offsets().Committed("g", "t", 0)
	require.Equal(t, int64(5), off, "first offset stored after the cut")
	code, _ = post(t, base+fmt.Sprintf("&queue=1&timestamp=%d", cut.UnixMilli()+60_000))
	require.Equal(t, http.StatusOK, code)
	off, _ = s.Core().Offsets().Committed("g", "t", 1)
	require.Equal(t, int64(5), off, "a time after everything resets to the end")

	for _, bad := range []string{"&offset=-1", "&queue=9&offset=1", "&timestamp=soon", "&time=yesterday", ""} {
		code, body := post(t, base+bad)
		require.Equal(t, http.StatusBadRequest, code, bad)
		require.Contains(t, body, "error")
	}
	code, _ = post(t, "http://"+s.MetricsAddr()+"/admin/reset?group=g&topic=nope&offset=1")
	require.Equal(t, http.StatusNotFound, code)
	code, _ = get(t, base+"&offset=1")
	require.Equal(t, http.StatusMethodNotAllowed, code)
	code, body = get(t, "http://"+s.MetricsAddr()+"/admin/offsets?group=g&topic=t")
	require.Equal(t, http.StatusOK, code)
	require.True(t, strings.Contains(body, `"committed":5`), body)
}

// An admin reset wakes a pop long-polling the queue (gRPC receives are
// pops) at once, and the host's own OnReset still hears of it.
func TestAdminResetWakesLongPollingPopsAndCallsTheHostsHook(t *testing.T) {
	var mu sync.Mutex
	var heard []string
	cfg := server.Config{}
	cfg.Core.Offset.OnReset = func(group, topic string, queueID int, offset int64, _ uint64) {
		mu.Lock()
		defer mu.Unlock()
		heard = append(heard, fmt.Sprintf("%s/%s/%d@%d", group, topic, queueID, offset))
	}
	s := start(t, cfg)
	_, err := s.Topics().Ensure("t", 1)
	require.NoError(t, err)
	require.NoError(t, s.Core().Store().Append(&store.Message{Topic: "t", Body: []byte("x")}))
	req := pop.Request{Group: "g", Topic: "t", ClientID: "c", Max: 1, Invisible: time.Minute}
	res, err := s.Core().Pop().Pop(context.Background(), req)
	require.NoError(t, err)
	require.Len(t, res.Messages, 1)
	require.NoError(t, s.Core().Pop().Ack(res.Messages[0].Handle))

	req.Poll = time.Minute
	done := make(chan pop.Result, 1)
	go func() {
		r, _ := s.Core().Pop().Pop(context.Background(), req)
		done <- r
	}()
	require.Eventually(t, func() bool { return s.Core().Pop().Stats().Waiters == 1 }, 5*time.Second, time.Millisecond)
	code, body := post(t, "http://"+s.MetricsAddr()+"/admin/reset?group=g&topic=t&offset=0")
	require.Equal(t, http.StatusOK, code, body)
	select {
	case r := <-done:
		require.Len(t, r.Messages, 1)
		require.Equal(t, int64(0), r.Messages[0].Message.QueueOffset)
	case <-time.After(10 * time.Second):
		t.Fatal("the long-polling pop slept through the reset")
	}
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{"g/t/0@0"}, heard)
}

func TestStartFailsCleanlyOnBusyPort(t *testing.T) {
	s := start(t, server.Config{})
	_, err := server.Start(server.Config{Dir: t.TempDir(), BrokerAddr: s.BrokerAddr(), NameSrvAddr: "127.0.0.1:0", MetricsAddr: "-"})
	require.ErrorContains(t, err, "broker listener")
	_, err = server.Start(server.Config{})
	require.ErrorContains(t, err, "Dir is required")
	_, err = server.Start(server.Config{Dir: t.TempDir(), Flush: "sometimes"})
	require.ErrorContains(t, err, "want sync or async")
}

func TestGRPCHookIsStartedAndClosedFirst(t *testing.T) {
	var closed []string
	svc := &fakeService{addr: "x:1", closed: &closed}
	s, err := server.Start(server.Config{Dir: t.TempDir(), NameSrvAddr: "127.0.0.1:0", BrokerAddr: "127.0.0.1:0", MetricsAddr: "-",
		GRPCAddr: "127.0.0.1:0", GRPC: func(s *server.Server, addr string) (server.Service, error) {
			require.NotNil(t, s.Core())
			require.NotNil(t, s.Topics())
			require.Equal(t, "127.0.0.1:0", addr)
			return svc, nil
		}})
	require.NoError(t, err)
	require.Equal(t, "x:1", s.GRPCAddr())
	require.NoError(t, s.Close())
	require.Equal(t, []string{"grpc"}, closed)
	_, err = server.Start(server.Config{Dir: t.TempDir(), NameSrvAddr: "127.0.0.1:0", BrokerAddr: "127.0.0.1:0", MetricsAddr: "-",
		GRPC: func(*server.Server, string) (server.Service, error) { return nil, fmt.Errorf("boom") }})
	require.ErrorContains(t, err, "boom")
}

type fakeService struct {
	addr   string
	closed *[]string
}

func (f *fakeService) Addr() string { return f.addr }
func (f *fakeService) Close() error { *f.closed = append(*f.closed, "grpc"); return nil }

func TestGCPercentIsGOGCWhenSetAndDefaultOtherwise(t *testing.T) {
	for env, want := range map[string]int{"": server.DefaultGCPercent, "off": -1, "50": 50, "800": 800} {
		t.Setenv("GOGC", env)
		got, err := server.GCPercent()
		require.NoError(t, err, env)
		require.Equal(t, want, got, env)
	}
	t.Setenv("GOGC", "half")
	_, err := server.GCPercent()
	require.ErrorContains(t, err, `GOGC="half"`)
}
