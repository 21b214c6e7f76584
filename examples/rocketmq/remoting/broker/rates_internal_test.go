package broker

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/brokercore/brokercore"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
	"github.com/brokercore/brokercore/store"
	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)

// feed adds one sample a second from t0: put grows by putStep, get by getStep.
func feed(r *rates, n int, putStep, getStep uint64) {
	for i := range n {
		r.add(rateSample{at: t0.Add(time.Duration(i) * time.Second), put: uint64(i) * putStep, get: uint64(i) * getStep})
	}
}

func TestRatesWindowsNeedTheirSamples(t *testing.T) {
	for _, c := range []struct {
		samples  int
		put, get string
	}{
		{1, "  ", "  "},                     // the first sample: no window yet (Apache prints blanks too)
		{10, "  ", "  "},                    // 9 s of samples: still no 10 s window
		{11, "5.0  ", "1.0  "},              // the 10 s window
		{61, "5.0 5.0 ", "1.0 1.0 "},        // and the 60 s one
		{700, "5.0 5.0 5.0", "1.0 1.0 1.0"}, // and 600 s; the list stays bounded
	} {
		r := newRates(t0)
		feed(r, c.samples, 5, 1)
		require.Equal(t, c.put, r.line(samplePut), "%d samples", c.samples)
		require.Equal(t, c.get, r.line(sampleGet), "%d samples", c.samples)
		require.LessOrEqual(t, len(r.samples), rateMaxSamples)
	}
}

func TestRatesUseTheRealSpan(t *testing.T) {
	r := newRates(t0)
	// Samples 1.5 s apart (a busy machine delays the ticker): the rate is
	// over the real elapsed time, as Apache's getTPS divides by timestamps.
	for i := range 11 {
		r.add(rateSample{at: t0.Add(time.Duration(i) * 1500 * time.Millisecond), put: uint64(i) * 30})
	}
	require.Equal(t, "20.0  ", r.line(samplePut))
	require.Equal(t, "0.0  ", r.line(sampleGet))
}

func TestRuntimeIsApacheFormat(t *testing.T) {
	r := newRates(t0)
	require.Equal(t, "[ 0 days, 0 hours, 0 minutes, 0 seconds ]", r.runtime(t0.Add(-time.Second)))
	require.Equal(t, "[ 1 days, 2 hours, 3 minutes, 4 seconds ]", r.runtime(t0.Add(26*time.Hour+3*time.Minute+4*time.Second+999*time.Millisecond)))
}

// The runtime table carries the sampled rates, not placeholders.
func TestRuntimeInfoReportsSampledRates(t *testing.T) {
	core, err := brokercore.Open(t.TempDir(), brokercore.Options{})
	require.NoError(t, err)
	defer core.Close()
	topics, err := OpenTopics("", 4)
	require.NoError(t, err)
	b := NewBroker(core, topics, BrokerOptions{Addr: "127.0.0.1:10911"})
	require.NoError(t, b.Close()) // stops the sampler: the test feeds it
	for i := range 3 {
		require.NoError(t, core.Store().Append(&store.Message{Topic: "t", Body: []byte{byte(i)}}))
	}
	b.rates = newRates(t0)
	b.rates.add(rateSample{at: t0})
	for i := 1; i <= 10; i++ {
		b.rates.add(rateSample{at: t0.Add(time.Duration(i) * time.Second), put: uint64(i) * 7, get: uint64(i) * 2})
	}
	resp := b.runtimeInfo(&wire.Command{Code: CodeGetBrokerRuntimeInfo, ExtFields: map[string]string{}})
	require.Equal(t, wire.Success, resp.Code)
	var body struct{ Table map[string]string }
	require.NoError(t, json.Unmarshal(resp.Body, &body))
	require.Equal(t, "7.0  ", body.Table["putTps"])
	require.Equal(t, "2.0  ", body.Table["getTransferredTps"])
	require.Equal(t, "3", body.Table["msgPutTotalTodayNow"])
	require.Regexp(t, `^\[ \d+ days, \d+ hours, \d+ minutes, \d+ seconds \]$`, body.Table["runtime"])
	require.Equal(t, "1796169600000", body.Table["bootTimestamp"])
}
