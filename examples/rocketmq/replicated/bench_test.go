package replicated

import (
	"bufio"
	"context"
	"net"
	"testing"
	"time"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
)

// BenchmarkSend is one send at a time on one connection to the leader's
// broker and to a follower's (which forwards it to the leader): what the
// follower's hop costs, with ACL off and on (a signed send, checked by the
// leader; through a follower, marked and the mark verified too). Three
// in-process nodes share the machine.
func BenchmarkSend(b *testing.B) {
	for _, aclOn := range []bool{false, true} {
		for _, via := range []string{"leader", "follower"} {
			name := "via=" + via
			if aclOn {
				name = "acl=on,via=" + via
			}
			b.Run(name, func(b *testing.B) { benchSend(b, aclOn, via) })
		}
	}
}

func benchSend(b *testing.B, aclOn bool, via string) {
	var tweaks []func(*Config)
	cmd := sendCmd("orders", "0123456789abcdef0123456789abcdef")
	if aclOn {
		tweaks = append(tweaks, withACL(b))
		signed(cmd, "app", "app-secret")
	}
	c := startCluster(b, 3, tweaks...)
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
}

// BenchmarkSendV5 is one v5 SendMessage at a time on one plaintext gRPC
// connection to the leader's endpoint and to a follower's (which forwards
// it to the leader's): what the follower's hop costs over gRPC.
func BenchmarkSendV5(b *testing.B) {
	for _, via := range []string{"leader", "follower"} {
		b.Run("via="+via, func(b *testing.B) {
			c := startCluster(b, 3)
			l := c.leader(30 * time.Second)
			addr := c.nodes[l].GRPCAddr()
			if via == "follower" {
				addr = c.nodes[(l+1)%3].GRPCAddr()
			}
			cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				b.Fatal(err)
			}
			defer cc.Close()
			client := v2.NewMessagingServiceClient(cc)
			ctx := metadata.AppendToOutgoingContext(context.Background(), "x-mq-client-id", "bench@1")
			req := &v2.SendMessageRequest{Messages: []*v2.Message{{Topic: &v2.Resource{Name: "bench"},
				Body: []byte("0123456789abcdef0123456789abcdef"),
				SystemProperties: &v2.SystemProperties{MessageId: "0100000000000000000000000000000001",
					MessageType: v2.MessageType_NORMAL, BodyEncoding: v2.Encoding_IDENTITY}}}}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				resp, err := client.SendMessage(ctx, req)
				if err != nil || resp.GetStatus().GetCode() != v2.Code_OK {
					b.Fatalf("%v %v", err, resp.GetStatus())
				}
			}
		})
	}
}
