package txn

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/brokercore/brokercore/internal/testkit"
	"github.com/brokercore/brokercore/store"
	"github.com/stretchr/testify/require"
)

var epoch = time.Date(2026, 5, 21, 14, 50, 0, 0, time.UTC)

// rig is a store and a Manager over it in a test directory, with one
// injected clock; reopen simulates a restart (or, from a crash image, a
// kill).
type rig struct {
	t     *testing.T
	dir   string
	clk   *testkit.Clock
	opts  Options
	log   *store.Store
	m     *Manager
	check *recorder
}

func newRig(t *testing.T, opts Options) *rig {
	t.Helper()
	r := &rig{t: t, dir: t.TempDir(), clk: testkit.NewClock(epoch), check: &recorder{}}
	opts.Now = r.clk.Now
	if opts.ProgressPath == "" {
		opts.ProgressPath = filepath.Join(r.dir, "txn.progress")
	}
	opts.Checker = r.check
	r.opts = opts
	r.open(r.dir)
	return r
}

func (r *rig) open(dir string) {
	r.t.Helper()
	r.dir = dir
	r.opts.ProgressPath = filepath.Join(dir, "txn.progress")
	log, err := store.Open(filepath.Join(dir, "store"), store.Options{Now: r.clk.Now})
	require.NoError(r.t, err)
	m, err := New(log, r.opts)
	require.NoError(r.t, err)
	r.log, r.m = log, m
	r.t.Cleanup(func() { _ = r.m.Close(); _ = r.log.Close() })
}

// restart closes both and opens them again on the same directory.
func (r *rig) restart() {
	r.t.Helper()
	require.NoError(r.t, r.m.Close())
	require.NoError(r.t, r.log.Close())
	r.open(r.dir)
}

// crash opens a copy of what a kill at this moment leaves on disk; the
// running instance is closed without writing anything more to the copy.
func (r *rig) crash() {
	r.t.Helper()
	img := r.t.TempDir()
	require.NoError(r.t, testkit.CopyCrashImage(r.dir, img))
	_ = r.m.Close()
	_ = r.log.Close()
	r.open(img)
}

func (r *rig) prepare(topic string, body string) int64 {
	r.t.Helper()
	h, err := r.m.Prepare(&store.Message{Topic: topic, QueueID: 1, Body: []byte(body),
		Properties: map[string]string{PropUniqKey: "u-" + body}}, "pg")
	require.NoError(r.t, err)
	return h.QueueOffset
}

// readAll reads every message of (topic, queue), page by page (Read
// clamps a large max).
func readAll(t *testing.T, r *rig, topic string, queue int) []*store.Message {
	t.Helper()
	var out []*store.Message
	for off := int64(0); ; {
		msgs, err := r.log.Read(topic, queue, off, 512)
		require.NoError(t, err)
		if len(msgs) == 0 {
			return out
		}
		out = append(out, msgs...)
		off = msgs[len(msgs)-1].QueueOffset + 1
	}
}

// delivered returns the bodies appended to (topic, 1).
func (r *rig) delivered(topic string) []string {
	r.t.Helper()
	msgs := readAll(r.t, r, topic, 1)
	out := make([]string, 0, len(msgs))
	for _, m := range msgs {
		out = append(out, string(m.Body))
	}
	return out
}

// recorder is a Checker that keeps what it was asked.
type recorder struct {
	mu     sync.Mutex
	checks []Check
	err    error
}

func (c *recorder) Check(ch Check) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.checks = append(c.checks, ch)
	return c.err
}

func (c *recorder) ids() []int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]int64, 0, len(c.checks))
	for _, ch := range c.checks {
		out = append(out, ch.ID)
	}
	return out
}

func (c *recorder) reset() {
	c.mu.Lock()
	c.checks = nil
	c.mu.Unlock()
}

// faultLog wraps a Log: failNext makes the next Append fail before writing
// (lost false) or after writing (lost true: the batch landed, the answer
// did not — a kill between the fsync and the reply); down makes every
// Append fail, writing nothing, until heal (a log that keeps failing).
type faultLog struct {
	Log
	mu      sync.Mutex
	fail    bool
	landed  bool
	down    bool
	appends int // Appends tried
}

var errKilled = errors.New("killed")

func (f *faultLog) failNext(landed bool) {
	f.mu.Lock()
	f.fail, f.landed = true, landed
	f.mu.Unlock()
}

func (f *faultLog) setDown(down bool) {
	f.mu.Lock()
	f.down = down
	f.mu.Unlock()
}

func (f *faultLog) tried() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.appends
}

func (f *faultLog) Append(msgs ...*store.Message) error {
	f.mu.Lock()
	fail, landed, down := f.fail, f.landed, f.down
	f.fail = false
	f.appends++
	f.mu.Unlock()
	if down {
		return errKilled
	}
	if !fail {
		return f.Log.Append(msgs...)
	}
	if landed {
		if err := f.Log.Append(msgs...); err != nil {
			return err
		}
	}
	return errKilled
}

func itoa(i int) string { return strconv.Itoa(i) }

func osWrite(path string, b []byte) error { return os.WriteFile(path, b, 0o644) }

func testkitCopy(from, to string) error { return testkit.CopyCrashImage(from, to) }
