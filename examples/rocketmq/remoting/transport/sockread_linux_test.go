package transport

import (
	"bufio"
	"bytes"
	"net"
	"os"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
)

// readSyscalls is the number of read system calls this process made
// (/proc/self/io's syscr: every read, one that found nothing ready too).
func readSyscalls(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/io")
	require.NoError(t, err)
	for _, line := range bytes.Split(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("syscr: ")); ok {
			n, err := strconv.ParseInt(string(v), 10, 64)
			require.NoError(t, err)
			return n
		}
	}
	t.Fatal("no syscr in /proc/self/io")
	return 0
}

// Over a socket, a burst of 64 sends of 1 KiB bodies written at once is
// read in a few reads of what is ready, not a read per KiB (a 1 KiB
// buffer took two reads per send: 1.7 read system calls per message
// against 0.45 before the budgeted reader), and served together. The count
// is the whole process's, the client's reads of the answers included.
func TestSocketBurstIsReadInFewSystemCalls(t *testing.T) {
	h := &batchHandler{inlineHandler: inlineHandler{blockCode: -1}}
	_, addr := listen(t, h, ServerOptions{Name: "test"})
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	r := bufio.NewReader(c)
	// A first request: the connection is being served before counting.
	_, err = c.Write(mustEncode(t, &wire.Command{Code: wire.CodeHeartbeat, Opaque: 1000, ExtFields: map[string]string{}}))
	require.NoError(t, err)
	require.Len(t, readAnswers(t, r, 1), 1)

	const n = 64
	var burst []byte
	for i := int32(1); i <= n; i++ {
		burst = append(burst, mustEncode(t, &wire.Command{Code: wire.CodeSendMessage, Opaque: i,
			ExtFields: map[string]string{}, Body: make([]byte, 1024)})...)
	}
	before := readSyscalls(t)
	_, err = c.Write(burst)
	require.NoError(t, err)
	require.Len(t, readAnswers(t, r, n), n)
	reads := readSyscalls(t) - before
	t.Logf("%d sends of 1 KiB (%d bytes in one write): %d read system calls in the process; batches %d",
		n, len(burst), reads, len(h.batches))
	require.Less(t, reads, int64(n/4), "reads per send")
}
