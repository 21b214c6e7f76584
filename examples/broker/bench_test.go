package main

import (
	"fmt"
	"testing"
)

// BenchmarkHTTPProduceBatch measures produce over HTTP: one request of 32
// messages per iteration, fsync per batch (SyncGroup).
func BenchmarkHTTPProduceBatch(b *testing.B) {
	tb := startBroker(b, b.TempDir(), nil)
	c, _ := tb.client(b)
	var in batchIn
	for i := range 32 {
		in.Messages = append(in.Messages, messageIn{Topic: "bench", QueueID: i % 4, Body: ptr(fmt.Sprintf("message %d with a body of some length", i))})
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := c.call(b.Context(), "POST", "/v1/messages/batch", in, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(in.Messages))/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkHTTPPopAck measures the consume path over HTTP: one pop of up
// to 32 messages and one batch ack request for them.
func BenchmarkHTTPPopAck(b *testing.B) {
	tb := startBroker(b, b.TempDir(), nil, func(c *Config) { c.Sync = "none" })
	c, _ := tb.client(b)
	var in batchIn
	for i := range 256 {
		in.Messages = append(in.Messages, messageIn{Topic: "bench", Body: ptr(fmt.Sprint("m", i))})
	}
	produced := 0
	msgs := 0
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if msgs >= produced {
			b.StopTimer()
			if err := c.call(b.Context(), "POST", "/v1/messages/batch", in, nil); err != nil {
				b.Fatal(err)
			}
			produced += len(in.Messages)
			b.StartTimer()
		}
		var res popOut
		if err := c.call(b.Context(), "POST", "/v1/pop", popIn{Group: "g", Topic: "bench", ClientID: "c", QueueID: ptr(0), Max: 32, Invisible: "1h"}, &res); err != nil {
			b.Fatal(err)
		}
		ack := ackIn{}
		for _, d := range res.Messages {
			ack.Handles = append(ack.Handles, d.Handle)
		}
		var out ackBatchOut
		if err := c.call(b.Context(), "POST", "/v1/ack", ack, &out); err != nil {
			b.Fatal(err)
		}
		for _, r := range out.Results {
			if !r.Acked {
				b.Fatal(r.Error)
			}
		}
		msgs += len(res.Messages)
	}
	b.ReportMetric(float64(msgs)/b.Elapsed().Seconds(), "msgs/s")
}
