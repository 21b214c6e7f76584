package brokercore_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore"
	"github.com/brokercore/brokercore/schedule"
	"github.com/brokercore/brokercore/store"
)

// TestPlanSendBackFollowsApacheConsumerSendMsgBack is a table of Apache
// RocketMQ's AbstractSendMessageProcessor.consumerSendMsgBack rules:
// delayLevel < 0 or reconsumeTimes >= max → DLQ; delayLevel 0 → level
// 3 + reconsumeTimes; the copy counts one more reconsume either way.
func TestPlanSendBackFollowsApacheConsumerSendMsgBack(t *testing.T) {
	for _, c := range []struct {
		name             string
		reconsume, level int
		max              int
		dlq              bool
		wantLevel        int
	}{
		{"first retry, level 0", 0, 0, 16, false, 3},
		{"fifth retry, level 0", 4, 0, 16, false, 7},
		{"client's own level", 2, 5, 16, false, 5},
		{"level past the highest is the scheduler's to clamp", 0, 99, 16, false, 99},
		{"negative level: dead letter at once", 0, -1, 16, true, 0},
		{"reconsume reached max", 16, 0, 16, true, 0},
		{"reconsume past max", 20, 3, 16, true, 0},
		{"one below max still retries", 15, 0, 16, false, 18},
		{"max -1 is the default 16", 15, 0, -1, false, 18},
		{"max -1, at 16", 16, 0, -1, true, 0},
		{"max 0: dead letter at once", 0, 0, 0, true, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := &store.Message{Topic: "orders", QueueID: 3, QueueOffset: 9, Tags: "A", Keys: []string{"k"},
				Body: []byte("b"), ReconsumeTimes: c.reconsume,
				Properties: map[string]string{"UNIQ_KEY": "u1", "DELAY": "2", "x": "y"}}
			p, err := brokercore.PlanSendBack(m, "billing", c.level, c.max)
			require.NoError(t, err)
			assert.Equal(t, c.dlq, p.DeadLetter)
			assert.Equal(t, c.wantLevel, p.Level)
			out := p.Message
			if c.dlq {
				assert.Equal(t, "%DLQ%billing", out.Topic)
			} else {
				assert.Equal(t, "%RETRY%billing", out.Topic)
			}
			assert.Zero(t, out.QueueID)
			assert.Equal(t, c.reconsume+1, out.ReconsumeTimes)
			assert.Equal(t, "orders", out.Properties[brokercore.PropRetryTopic])
			assert.Equal(t, "u1", out.Properties[brokercore.PropOriginMessageID])
			assert.NotContains(t, out.Properties, brokercore.PropDelayLevel)
			assert.Equal(t, "y", out.Properties["x"])
			assert.Equal(t, "A", out.Tags)
			assert.Equal(t, "2", m.Properties["DELAY"], "m is not modified")
		})
	}
}

// A message already retried keeps its first topic and origin id.
func TestPlanSendBackKeepsTheFirstRetryTopicAndOrigin(t *testing.T) {
	m := &store.Message{Topic: "%RETRY%billing", ReconsumeTimes: 1, Properties: map[string]string{
		"RETRY_TOPIC": "orders", "ORIGIN_MESSAGE_ID": "first", "UNIQ_KEY": "second"}}
	p, err := brokercore.PlanSendBack(m, "billing", 0, -1)
	require.NoError(t, err)
	assert.Equal(t, "orders", p.Message.Properties["RETRY_TOPIC"])
	assert.Equal(t, "first", p.Message.Properties["ORIGIN_MESSAGE_ID"])
	assert.Equal(t, 4, p.Level)
}

func TestPlanSendBackRefusesANilMessageAndABadGroup(t *testing.T) {
	_, err := brokercore.PlanSendBack(nil, "g", 0, -1)
	require.ErrorIs(t, err, brokercore.ErrInvalid)
	_, err = brokercore.PlanSendBack(&store.Message{Topic: "t"}, strings.Repeat("g", brokercore.MaxGroupLen+1), 0, -1)
	require.ErrorIs(t, err, brokercore.ErrInvalid)
}

// Broker.SendBack returns the retry message rewritten for the scheduler
// (delivered to %RETRY%group after its level), or the dead letter as is.
func TestBrokerSendBackDelaysRetriesThroughTheScheduler(t *testing.T) {
	clk := newClock()
	b := openBroker(t, t.TempDir(), testOptions(clk))
	m := &store.Message{Topic: topic, Body: []byte("x")}
	d, err := b.SendBack(m, group, 0, -1)
	require.NoError(t, err)
	assert.Equal(t, schedule.Topic, d.Topic)
	assert.Equal(t, "%RETRY%g", d.Properties[schedule.PropRealTopic])
	require.NoError(t, b.Store().Append(d))
	clk.Advance(2 * time.Second)
	require.Eventually(t, func() bool { return b.Store().MaxOffset("%RETRY%g", 0) == 1 }, 10*time.Second, time.Millisecond)

	dl, err := b.SendBack(m, group, -1, -1)
	require.NoError(t, err)
	assert.Equal(t, "%DLQ%g", dl.Topic)
}
