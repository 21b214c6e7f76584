package replicated

import (
	"bufio"
	"net"
	"testing"
	"time"

	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
)

// BenchmarkSend is one send at a time on one connection to the leader's
// broker and to a follower's (which forwards it to the leader): what the
// follower's hop costs. Three in-process nodes share the machine.
func BenchmarkSend(b *testing.B) {
	for _, via := range []string{"leader", "follower"} {
		b.Run("via="+via, func(b *testing.B) {
			c := startCluster(b, 3)
			l := c.leader(30 * time.Second)
			addr := c.nodes[l].BrokerAddr()
			if via == "follower" {
				addr = c.nodes[(l+1)%3].BrokerAddr()
			}
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Close()
			r := bufio.NewReader(conn)
			cmd := sendCmd("bench", "0123456789abcdef0123456789abcdef")
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				cmd.Opaque = int32(i + 1)
				f, err := wire.Encode(cmd)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := conn.Write(f); err != nil {
					b.Fatal(err)
				}
				fr, err := wire.ReadFrame(r, wire.DefaultMaxFrame)
				if err != nil {
					b.Fatal(err)
				}
				resp, err := wire.Decode(fr)
				if err != nil || resp.Code != wire.Success {
					b.Fatalf("%v %+v", err, resp)
				}
			}
		})
	}
}
