package brokertest

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// FreeAddr returns a 127.0.0.1 address nothing listens on, for a server a
// test starts later, often in a child process it kills and restarts on the
// same address.
//
// The usual recipe, listening on port 0 and closing the listener, hands
// out a port from the kernel's ephemeral range, which every outgoing
// connection on the machine draws its local port from: under load one of
// them can take the port before the server binds it ("address already in
// use"). FreeAddr picks below that range, where only explicit binds go,
// checks the port binds, and never returns the same port twice in one
// process.
func FreeAddr(t testing.TB) string {
	t.Helper()
	addr, err := freeAddr()
	if err != nil {
		t.Fatalf("brokertest.FreeAddr: %v", err)
	}
	return addr
}

var picked struct {
	sync.Mutex
	ports map[int]bool
}

// portRange is where FreeAddr picks: the 12,000 ports just below the
// ephemeral range (Linux's default starts at 32768, as do most systems';
// macOS and Windows start at 49152).
func portRange() (lo, hi int) {
	hi = 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > 1024+1000 {
				hi = n
			}
		}
	}
	return max(1024, hi-12000), hi
}

func freeAddr() (string, error) {
	lo, hi := portRange()
	picked.Lock()
	defer picked.Unlock()
	if picked.ports == nil {
		picked.ports = map[int]bool{}
	}
	var last error
	for range 200 {
		port := lo + rand.IntN(hi-lo)
		if picked.ports[port] {
			continue
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		l, err := net.Listen("tcp", addr)
		if err != nil {
			last = err
			continue
		}
		_ = l.Close()
		picked.ports[port] = true
		return addr, nil
	}
	return "", fmt.Errorf("no free port in [%d, %d) after 200 tries: %v", lo, hi, last)
}
