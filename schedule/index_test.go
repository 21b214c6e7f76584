package schedule

import (
	"bytes"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/brokercore/brokercore/internal/fsx/fsxtest"
	"github.com/brokercore/brokercore/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func FuzzDecodeIndexEntries(f *testing.F) {
	f.Add(appendEntry(appendEntry(nil, entry{key: timerKey{1700000000000, 3}, hash: 9}), entry{key: timerKey{-5, 0}, hash: 1}))
	f.Add([]byte{})
	f.Add(make([]byte, 23))
	f.Fuzz(func(t *testing.T, b []byte) {
		es, err := decodeEntries(b, nil)
		if err != nil {
			require.ErrorIs(t, err, errIndexDamaged)
			return
		}
		require.Len(t, es, len(b)/entrySize, "a torn tail is ignored, nothing else")
		var again []byte
		for _, e := range es {
			require.GreaterOrEqual(t, e.key.off, int64(0))
			again = appendEntry(again, e)
		}
		require.True(t, bytes.Equal(b[:len(again)], again))
	})
}

func FuzzDecodeIndexMeta(f *testing.F) {
	f.Add(encodeMeta(42))
	f.Add([]byte("BCTI"))
	f.Fuzz(func(t *testing.T, b []byte) {
		id, err := decodeMeta(b)
		if err != nil {
			require.ErrorIs(t, err, errIndexDamaged)
			return
		}
		require.Equal(t, b, encodeMeta(id))
	})
}

func TestSlotOfFloorsNegativeTimes(t *testing.T) {
	w := SlotWidth.Milliseconds()
	assert.Equal(t, int64(0), slotOf(0))
	assert.Equal(t, int64(0), slotOf(w-1))
	assert.Equal(t, int64(1), slotOf(w))
	assert.Equal(t, int64(-1), slotOf(-1))
	assert.Equal(t, int64(-1), slotOf(-w))
}

// TestAFailedIndexWriteIsRetriedAndLosesNothing injects write and fsync
// failures (a full disk) into the index files: the timers wait, then are
// delivered once the disk is back.
func TestAFailedIndexWriteIsRetriedAndLosesNothing(t *testing.T) {
	for _, op := range []fsxtest.Op{fsxtest.OpWrite, fsxtest.OpSync, fsxtest.OpOpen} {
		clk := newClock()
		l := newFakeLog(clk.Now)
		ffs := &fsxtest.Faulty{}
		s, err := New(l, Options{Now: clk.Now, ProgressPath: filepath.Join(t.TempDir(), "progress"), fs: ffs})
		require.NoError(t, err)
		var keys []string
		for i := 0; i < 10; i++ {
			keys = append(keys, at(t, s, l, "orders", clk.Now().Add(time.Duration(i)*time.Second)))
		}
		ffs.Fail(op, 1, fsxtest.ENOSPC)
		d := drive(s)
		d.timers(clk.Now().Add(time.Hour))
		assert.Empty(t, l.delivered("orders"), "op %v: nothing delivered while the index cannot be written", op)
		ffs.Heal()
		d.timers(clk.Now().Add(time.Hour))
		d.end(t)
		c := countByKey(l, "orders")
		for _, k := range keys {
			assert.Equal(t, 1, c[k], "op %v", op)
		}
	}
}

// fakeProgressLog is a replicated host's log: messages and progress are
// applied in one step (a raft entry).
type fakeProgressLog struct {
	*fakeLog
	mu       sync.Mutex
	progress []byte
	calls    atomic.Int64
}

func (p *fakeProgressLog) AppendWithProgress(b []byte, msgs ...*store.Message) error {
	p.calls.Add(1)
	if err := p.fakeLog.Append(msgs...); err != nil {
		return err
	}
	p.mu.Lock()
	p.progress = append([]byte(nil), b...)
	p.mu.Unlock()
	return nil
}

func (p *fakeProgressLog) LoadProgress() ([]byte, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.progress, nil
}

func TestAProgressLogKeepsLevelsTimersAndCancelsInsteadOfTheFile(t *testing.T) {
	clk := newClock()
	pl := &fakeProgressLog{fakeLog: newFakeLog(clk.Now)}
	path := filepath.Join(t.TempDir(), "progress")
	open := func() *Scheduler {
		s, err := New(pl, Options{Now: clk.Now, ProgressPath: path})
		require.NoError(t, err)
		return s
	}
	s := open()
	lk := produce(t, s, pl.fakeLog, "orders", 1, 2)
	t1 := at(t, s, pl, "orders", clk.Now().Add(time.Minute))
	t2 := at(t, s, pl, "orders", clk.Now().Add(2*time.Minute))
	t3 := at(t, s, pl, "orders", clk.Now().Add(3*time.Minute))
	d := drive(s)
	for _, lv := range s.lv {
		s.step(d.g, lv, &cursor{next: lv.next.Load()}, clk.Now().Add(time.Hour))
	}
	d.timers(clk.Now().Add(time.Minute))
	require.NoError(t, s.Cancel(t3))
	d.end(t)
	assert.NoFileExists(t, path, "the progress went through the ProgressLog")
	assert.Positive(t, pl.calls.Load())

	s = open() // another node (its own index) takes over from the replicated progress
	d = drive(s)
	for _, lv := range s.lv {
		s.step(d.g, lv, &cursor{next: lv.next.Load()}, clk.Now().Add(time.Hour))
	}
	d.timers(clk.Now().Add(time.Hour))
	d.end(t)
	c := countByKey(pl.fakeLog, "orders")
	assert.Equal(t, map[string]int{lk[0]: 1, lk[1]: 1, t1: 1, t2: 1}, c)
}

// TestFlapsDuringSlowAppendsThenARestartDeliverEachTimerOnce: 1,000 timers,
// 30 Stop/Start flaps while appends are slow, then a new Scheduler over the
// same log and progress: each timer is delivered exactly once.
func TestFlapsDuringSlowAppendsThenARestartDeliverEachTimerOnce(t *testing.T) {
	for name, opts := range restartCases(t) {
		t.Run(name, func(t *testing.T) {
			clk := newClock()
			l := newFakeLog(clk.Now)
			o := opts()
			o.Now, o.Tick, o.MaxBatch = clk.Now, time.Millisecond, 16
			s, err := New(l, o)
			require.NoError(t, err)
			t0 := clk.Now()
			var keys []string
			for i := 0; i < 1000; i++ {
				keys = append(keys, at(t, s, l, "orders", t0.Add(time.Duration(i%100)*time.Second)))
			}
			entered, release := make(chan struct{}, 1), make(chan struct{})
			var armed atomic.Bool
			l.setHook(func([]*store.Message) error {
				if armed.CompareAndSwap(true, false) {
					entered <- struct{}{}
					<-release // a slow append: it waits for the flapper
				}
				return nil
			})
			require.NoError(t, s.Start())
			for i := 0; i < 30; i++ {
				armed.Store(true)
				clk.Advance(2 * time.Second)
				select {
				case <-entered:
				case <-time.After(5 * time.Second):
					t.Fatalf("flap %d: no delivery under way", i)
				}
				flapped := make(chan struct{})
				go func() { defer close(flapped); assert.NoError(t, s.Stop()); assert.NoError(t, s.Start()) }()
				waitBlockedOrDone(t, flapped)
				release <- struct{}{}
				<-flapped
			}
			require.NoError(t, s.Stop())
			l.setHook(nil)
			s2, err := New(l, o)
			require.NoError(t, err)
			require.NoError(t, s2.Start())
			clk.Advance(time.Hour)
			waitUntil(t, "every timer", func() bool { return len(l.delivered("orders")) >= 1000 })
			require.NoError(t, s2.Stop())
			c := countByKey(l, "orders")
			for i, k := range keys {
				require.Equal(t, 1, c[k], "timer %d", i)
			}
			require.Len(t, l.delivered("orders"), 1000)
		})
	}
}
