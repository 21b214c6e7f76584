//go:build unix

package store_test

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/store"
)

const fdChildEnv = "BROKERCORE_STORE_FD_CHILD"

// Every (topic, queue) has an index file; the descriptors the store holds
// are bounded by Options.MaxOpenFiles, not by the number of queues. A child
// process with RLIMIT_NOFILE lowered to 1,024 appends to and reads every
// one of 20,000 queues (100,000 under BROKERCORE_LONG=1), across a reopen.
func TestManyQueuesUnderA1024DescriptorLimit(t *testing.T) {
	if dir := os.Getenv(fdChildEnv); dir != "" {
		fdChild(t, dir)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestManyQueuesUnderA1024DescriptorLimit$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), fdChildEnv+"="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if len(out) > 4000 {
		out = out[len(out)-4000:]
	}
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "fd child ok", "%s", out)
}

func fdChild(t *testing.T, dir string) {
	lim := syscall.Rlimit{Cur: 1024, Max: 1024}
	require.NoError(t, syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim))
	queues := 20000
	if os.Getenv("BROKERCORE_LONG") == "1" {
		queues = 100000
	}
	topic := func(i int) (string, int) { return "topic-" + strconv.Itoa(i/4), i % 4 }
	opts := store.Options{Sync: store.SyncNone}
	s, err := store.Open(dir, opts)
	require.NoError(t, err)
	for i := 0; i < queues; i += 50 {
		var batch []*store.Message
		for j := i; j < min(i+50, queues); j++ {
			tp, q := topic(j)
			batch = append(batch, msg(tp, q, "m-"+strconv.Itoa(j)))
		}
		require.NoError(t, s.Append(batch...), "queue %d", i)
	}
	check := func(round int) {
		for i := 0; i < queues; i++ {
			tp, q := topic(i)
			got, err := s.Read(tp, q, 0, 10)
			require.NoError(t, err, "round %d queue %d", round, i)
			require.Len(t, got, round, "round %d queue %d", round, i)
			require.Equal(t, "m-"+strconv.Itoa(i), string(got[0].Body))
		}
		st := s.Stats()
		require.False(t, st.Failed)
		require.Equal(t, queues, st.Queues)
		require.LessOrEqual(t, st.IndexFilesOpen, store.DefaultMaxOpenFiles)
	}
	check(1)
	require.NoError(t, s.Close())
	s, err = store.Open(dir, opts)
	require.NoError(t, err)
	for i := 0; i < queues; i++ {
		tp, q := topic(i)
		require.NoError(t, s.Append(msg(tp, q, "again")), "queue %d", i)
	}
	check(2)
	require.NoError(t, s.Close())
	fmt.Println("fd child ok")
}
