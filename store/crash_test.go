package store

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// childEnv, when set, turns the test binary into the crash child: it appends
// to the store in the named directory until it is killed, printing every
// append after it returned.
const childEnv = "BROKERCORE_STORE_CRASH_CHILD"

// queuesEnv sets the number of queues the crash child spreads its appends
// over (default 3).
const queuesEnv = "BROKERCORE_STORE_CRASH_QUEUES"

func crashChild() int {
	nq := 3
	fmt.Sscan(os.Getenv(queuesEnv), &nq)
	s, err := Open(os.Getenv(childEnv), Options{SegmentSize: 32 << 10})
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 2
	}
	var out sync.Mutex
	for w := 0; w < 4; w++ {
		go func() {
			for i := 0; ; i++ {
				batch := make([]*Message, 1+i%3)
				for j := range batch {
					body := fmt.Sprintf("w%d-%d-%d-%s", w, i, j, strings.Repeat("x", rand.IntN(300)))
					batch[j] = &Message{Topic: "crash", QueueID: (w*7919 + i*31 + j) % nq, Body: []byte(body)}
				}
				if err := s.Append(batch...); err != nil {
					fmt.Fprintln(os.Stderr, "append:", err)
					os.Exit(3)
				}
				var b strings.Builder
				for _, m := range batch {
					fmt.Fprintf(&b, "ok %d %d %s\n", m.QueueID, m.QueueOffset, m.Body)
				}
				out.Lock()
				os.Stdout.WriteString(b.String())
				out.Unlock()
			}
		}()
	}
	select {} // until killed
}

type ack struct {
	queue int
	off   int64
	body  string
}

// runCrashChild starts the child on dir, kills it (SIGKILL) after it
// reported `after` appends, and returns every append it reported.
func runCrashChild(t *testing.T, dir string, after, queues int) []ack {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+dir, fmt.Sprint(queuesEnv, "=", queues))
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	var acks []ack
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	killed := false
	timeout := time.AfterFunc(60*time.Second, func() { cmd.Process.Kill() })
	defer timeout.Stop()
	for sc.Scan() {
		var a ack
		_, err := fmt.Sscanf(sc.Text(), "ok %d %d %s", &a.queue, &a.off, &a.body)
		require.NoError(t, err, sc.Text())
		acks = append(acks, a)
		if len(acks) >= after && !killed {
			require.NoError(t, cmd.Process.Kill()) // mid-append, lines may still be in the pipe
			killed = true
		}
	}
	cmd.Wait()
	require.True(t, killed, "child ended by itself: %s", stderr.String())
	return acks
}

// TestKilledProcessLosesNoAcknowledgedAppend kills a child process in the
// middle of SyncGroup appends from several goroutines, again and again on
// the same directory, and checks that every append the child saw succeed
// is there, at its offset, with its body, and that offsets stay dense; at 3
// and at 10,000 queues, logging how long each recovery took.
// BROKERCORE_LONG=1 runs many rounds.
func TestKilledProcessLosesNoAcknowledgedAppend(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns child processes")
	}
	for _, queues := range []int{3, 10000} {
		t.Run(fmt.Sprintf("queues%d", queues), func(t *testing.T) { killRounds(t, queues) })
	}
}

func killRounds(t *testing.T, queues int) {
	rounds := 3
	if os.Getenv("BROKERCORE_LONG") != "" {
		rounds = 40
	}
	dir := t.TempDir()
	var all []ack
	for r := 0; r < rounds; r++ {
		all = append(all, runCrashChild(t, dir, 20+rand.IntN(200)*(1+queues/1000), queues)...)
		t0 := time.Now()
		s := openT(t, dir, Options{})
		t.Logf("round %d: recovery of %d queues took %v, replayed %d records", r, queues, time.Since(t0), s.Stats().Replayed)
		seen := map[int]bool{}
		for _, a := range all {
			seen[a.queue] = true
		}
		for q := range seen {
			max := s.MaxOffset("crash", q)
			for off := int64(0); off < max; off += MaxReadBatch {
				got, err := s.Read("crash", q, off, MaxReadBatch)
				require.NoError(t, err)
				for i, m := range got {
					require.Equal(t, off+int64(i), m.QueueOffset, "offsets stay dense")
				}
			}
		}
		for _, a := range all {
			got, err := s.Read("crash", a.queue, a.off, 1)
			require.NoError(t, err)
			require.Len(t, got, 1, "round %d: acknowledged append %d/%d lost", r, a.queue, a.off)
			assert.Equal(t, a.body, string(got[0].Body))
		}
		require.NoError(t, s.Close())
	}
	t.Logf("%d rounds, %d acknowledged appends checked", rounds, len(all))
}
