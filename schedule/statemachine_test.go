package schedule

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/brokercore/brokercore/internal/fsx"
	"github.com/brokercore/brokercore/store"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// instLog is one scheduler instance's view of the shared log. A crash makes
// the instance dead: the append in flight at that moment reaches the log (the
// worst case: written, progress not yet recorded), the progress file is
// snapshotted as the crash image, and every later append of the instance
// fails, as a dead process writes nothing.
type instLog struct {
	*fakeLog
	mu      sync.Mutex
	armed   bool
	dead    atomic.Bool
	path    string
	image   []byte           // progress file at the crash; nil = no file
	last    map[int][]string // level -> keys of this instance's last committed batch
	levelOf func(key string) int
}

func (il *instLog) Append(msgs ...*store.Message) error {
	if len(msgs) == 0 || isSystemTopic(msgs[0].Topic) {
		return il.fakeLog.Append(msgs...)
	}
	il.mu.Lock()
	defer il.mu.Unlock()
	if il.dead.Load() {
		return errInjected
	}
	if il.armed {
		il.image, _ = os.ReadFile(il.path)
		il.dead.Store(true)
	}
	if err := il.fakeLog.Append(msgs...); err != nil {
		return err
	}
	var keys []string
	for _, m := range msgs {
		keys = append(keys, m.Properties[PropUniqKey])
	}
	il.last[il.levelOf(keys[0])] = keys
	return nil
}

type producedMsg struct {
	level  int // 0: a timer
	offset int64
	due    time.Time
	key    timerKey // a timer's key
}

// TestSchedulerMatchesModelUnderAnyStartStopCrashInterleaving is the
// state-machine test: random delayed messages and timers (past and future),
// cancels, Start, Stop, concurrent flaps, clock moves, restarts and crashes
// over one log, one progress file and one timer index, with appends that are
// slow or fail at random. Properties: each delayed message and timer is
// delivered exactly once (once more after a crash only if it was in the
// batch in flight, with the same UNIQ_KEY), never before it is due; a
// timer whose Cancel succeeded is never delivered; progress never moves
// backwards.
func TestSchedulerMatchesModelUnderAnyStartStopCrashInterleaving(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		const levels = "1s 2s 5s"
		delays := []time.Duration{time.Second, 2 * time.Second, 5 * time.Second}
		clk := newClock()
		shared := newFakeLog(clk.Now)
		path := filepath.Join(t.TempDir(), "progress")

		var mmu sync.Mutex
		produced := map[string]producedMsg{}
		allowed := map[string]int{} // extra deliveries a crash allows
		var early []string
		var failNext atomic.Int32
		var slow atomic.Bool
		shared.setHook(func(msgs []*store.Message) error {
			now := clk.Now()
			mmu.Lock()
			for _, m := range msgs {
				if p := produced[m.Properties[PropUniqKey]]; now.Before(p.due) {
					early = append(early, m.Properties[PropUniqKey])
				}
			}
			mmu.Unlock()
			if slow.Load() {
				yieldN(20)
			}
			if failNext.Load() > 0 && failNext.Add(-1) >= 0 {
				return errInjected
			}
			return nil
		})
		levelOf := func(k string) int { mmu.Lock(); defer mmu.Unlock(); return produced[k].level }

		var il *instLog
		var s *Scheduler
		open := func() {
			il = &instLog{fakeLog: shared, path: path, last: map[int][]string{}, levelOf: levelOf}
			var err error
			s, err = New(il, Options{Levels: levels, Now: clk.Now, Tick: time.Millisecond, MaxBatch: 3, ProgressPath: path})
			require.NoError(rt, err)
		}
		open()
		defer func() { _ = s.Stop() }()
		running := false
		seen := s.Progress()

		// Cancel is not drawn yet: with crashes in the mix a draft of the
		// action saw Cancel answer ErrDelivered for a timer not in the log,
		// not yet explained (issue note); Cancel has deterministic tests.
		cancelled := map[string]bool{}
		atCancel := map[string]int{} // deliveries of a timer when its Cancel succeeded
		var timerKeys []string
		produceTimer := func(ahead time.Duration) {
			when := clk.Now().Add(ahead)
			d, err := s.At(&store.Message{Topic: "t", Body: []byte("timer")}, when)
			require.NoError(rt, err)
			require.NoError(rt, shared.Append(d))
			k, ok := timerOf(d, DefaultMaxTimerDelay)
			require.True(rt, ok)
			mmu.Lock()
			produced[d.Properties[PropUniqKey]] = producedMsg{0, d.QueueOffset, when, k}
			timerKeys = append(timerKeys, d.Properties[PropUniqKey])
			mmu.Unlock()
		}
		produceN := func(level, n int) {
			for i := 0; i < n; i++ {
				d, err := s.Delay(&store.Message{Topic: "t", Body: []byte{byte(i)}}, level)
				require.NoError(rt, err)
				require.NoError(rt, shared.Append(d))
				mmu.Lock()
				produced[d.Properties[PropUniqKey]] = producedMsg{level, d.QueueOffset, d.StoredAt.Add(delays[level-1]), timerKey{}}
				mmu.Unlock()
			}
		}
		dueNow := func() []string {
			mmu.Lock()
			defer mmu.Unlock()
			var out []string
			for k, p := range produced {
				if !clk.Now().Before(p.due) {
					out = append(out, k)
				}
			}
			return out
		}

		rt.Repeat(map[string]func(*rapid.T){
			"timer": func(rt *rapid.T) {
				produceTimer(time.Duration(rapid.IntRange(-4, 12).Draw(rt, "halfSecondsAhead")) * 500 * time.Millisecond)
			},
			"cancel": func(rt *rapid.T) {
				mmu.Lock()
				n := len(timerKeys)
				mmu.Unlock()
				if n == 0 {
					return
				}
				mmu.Lock()
				k := timerKeys[rapid.IntRange(0, n-1).Draw(rt, "timer")]
				when := produced[k].due
				mmu.Unlock()
				var err error
				if rapid.Bool().Draw(rt, "byTime") {
					err = s.CancelAt(k, when) // the one timer with this key is at when
				} else {
					err = s.Cancel(k)
				}
				switch {
				case err == nil:
					require.False(rt, cancelled[k], "a second cancel succeeded")
					// Delivered already only if a crash put it back to pending.
					require.LessOrEqual(rt, countByKey(shared, "t")[k], allowed[k], "cancel of a delivered timer succeeded")
					cancelled[k] = true
					atCancel[k] = countByKey(shared, "t")[k]
				case errors.Is(err, ErrCancelled):
					require.True(rt, cancelled[k])
				case errors.Is(err, ErrDelivered):
					if countByKey(shared, "t")[k] == 0 {
						mmu.Lock()
						p := produced[k]
						mmu.Unlock()
						rt.Logf("key %s produced %+v; timers %+v durable %d cancelled %v", k, p, s.timers.st, s.timers.durable, cancelled[k])
					}
					require.Positive(rt, countByKey(shared, "t")[k])
				default:
					// A dead instance cannot store the cancel: that is an error, not a lie.
					require.True(rt, il.dead.Load(), "cancel: %v", err)
				}
			},
			"produce": func(rt *rapid.T) {
				produceN(rapid.IntRange(1, 3).Draw(rt, "level"), rapid.IntRange(1, 4).Draw(rt, "n"))
			},
			"advance": func(rt *rapid.T) {
				clk.Advance(time.Duration(rapid.IntRange(0, 6).Draw(rt, "halfSeconds")) * 500 * time.Millisecond)
			},
			"start": func(rt *rapid.T) {
				require.NoError(rt, s.Start())
				running = true
			},
			"stop": func(rt *rapid.T) {
				was := running
				require.NoError(rt, s.Stop())
				running = false
				if was {
					p, err := loadProgress(path)
					require.NoError(rt, err)
					require.Equal(rt, s.Progress(), p, "Stop records progress")
				}
			},
			"flap": func(rt *rapid.T) {
				// Leadership callbacks race: Stop and Start from two goroutines.
				var wg sync.WaitGroup
				wg.Add(2)
				go func() { defer wg.Done(); _ = s.Stop() }()
				go func() { defer wg.Done(); _ = s.Start() }()
				wg.Wait()
				running = s.Stats().Running
			},
			"failAppends": func(rt *rapid.T) {
				failNext.Store(int32(rapid.IntRange(1, 3).Draw(rt, "fails")))
			},
			"toggleSlow": func(rt *rapid.T) { slow.Store(!slow.Load()) },
			"restart": func(rt *rapid.T) {
				require.NoError(rt, s.Stop())
				open()
				running = false
			},
			"crash": func(rt *rapid.T) {
				require.NoError(rt, s.Start())
				il.mu.Lock()
				il.armed = true
				il.mu.Unlock()
				produceN(1, rapid.IntRange(1, 3).Draw(rt, "n"))
				clk.Advance(time.Second)
				waitUntil(rt, "the crash", il.dead.Load)
				old := il
				require.NoError(rt, s.Stop())
				if old.image == nil {
					require.NoError(rt, os.Remove(path))
				} else {
					require.NoError(rt, os.WriteFile(path, old.image, 0o644))
				}
				image, err := loadProgress(path)
				require.NoError(rt, err)
				timers := timerState{done: noneDone}
				j := progressJournal{fs: fsx.OS, path: path}
				if b, _, err := j.load(); b != nil || err != nil {
					require.NoError(rt, err)
					p, err := decodeProgress(b)
					require.NoError(rt, err)
					timers = p.timer
				}
				for level, keys := range old.last {
					for _, k := range keys {
						mmu.Lock()
						if p := produced[k]; (level > 0 && p.offset >= image[level]) || (level == 0 && timers.done.less(p.key)) {
							allowed[k]++ // once more per crash that caught it in flight
						}
						mmu.Unlock()
					}
				}
				open()
				running = false
				for level := range seen { // the crash image is the new floor
					seen[level] = image[level]
				}
			},
			"": func(rt *rapid.T) {
				if running && failNext.Load() <= 0 {
					due := dueNow()
					waitUntil(rt, "due messages delivered", func() bool {
						c := countByKey(shared, "t")
						for _, k := range due {
							if c[k] == 0 && !cancelled[k] {
								return false
							}
						}
						return true
					})
				}
				mmu.Lock()
				require.Empty(rt, early, "delivered before due")
				mmu.Unlock()
				for k, n := range countByKey(shared, "t") {
					require.LessOrEqual(rt, n, 1+allowed[k], "message %s delivered %d times", k, n)
					if cancelled[k] {
						require.Equal(rt, atCancel[k], n, "timer %s delivered after its Cancel succeeded", k)
					}
				}
				p := s.Progress()
				for level, off := range p {
					require.GreaterOrEqual(rt, off, seen[level], "progress of level %d moved backwards", level)
				}
				seen = p
			},
		})

		// Finally everything is delivered.
		failNext.Store(0)
		require.NoError(rt, s.Start())
		clk.Advance(time.Minute)
		mmu.Lock()
		n := len(produced)
		mmu.Unlock()
		waitUntil(rt, "all delivered", func() bool {
			c := countByKey(shared, "t")
			mmu.Lock()
			defer mmu.Unlock()
			for k := range produced {
				if c[k] == 0 && !cancelled[k] {
					return false
				}
			}
			return true
		})
		_ = n
		require.NoError(rt, s.Stop())
		for k, c := range countByKey(shared, "t") {
			require.GreaterOrEqual(rt, c, 1)
			require.LessOrEqual(rt, c, 1+allowed[k], "message %s", k)
		}
	})
}
