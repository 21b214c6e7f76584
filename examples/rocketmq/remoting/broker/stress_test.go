package broker_test

import (
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
	"github.com/brokercore/brokercore/examples/rocketmq/rmqtest"
	"github.com/stretchr/testify/require"
)

// Many connections at once sending, heartbeating, long-polling, committing
// and locking while offsets are reset and connections come and go: the
// race detector's view of the broker's shared state, and every answer is
// one the protocol allows.
func TestConcurrentConnectionsUnderResets(t *testing.T) {
	b := rmqtest.Start(t)
	const workers, sends = 6, 150
	var wg sync.WaitGroup
	errs := make(chan error, workers*4)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rc := dial(t, b.Broker)
			client := fmt.Sprintf("c%d", w)
			hb := `{"clientID":"` + client + `","consumerDataSet":[{"groupName":"g","messageModel":"CLUSTERING",` +
				`"subscriptionDataSet":[{"topic":"t","subString":"*","subVersion":1}]}]}`
			if resp := rc.call(req(wire.CodeHeartbeat, nil, []byte(hb))); resp.Code != wire.Success {
				errs <- fmt.Errorf("heartbeat: %d %s", resp.Code, resp.Remark)
				return
			}
			next := int64(0)
			q := w % 4
			for i := 0; i < sends; i++ {
				if resp := rc.call(sendReq("t", q, "m")); resp.Code != wire.Success {
					errs <- fmt.Errorf("send: %d %s", resp.Code, resp.Remark)
					return
				}
				p := pullReq("t", strconv.FormatInt(next, 10), "5")
				p.ExtFields["queueId"] = strconv.Itoa(q)
				p.ExtFields["sysFlag"] = "3"
				p.ExtFields["commitOffset"] = strconv.FormatInt(next, 10)
				resp := rc.call(p)
				switch resp.Code {
				case wire.Success, wire.PullNotFound, wire.PullOffsetMoved, wire.PullRetryImmediately:
					n, err := strconv.ParseInt(resp.ExtFields["nextBeginOffset"], 10, 64)
					if err != nil {
						errs <- err
						return
					}
					next = n
				default:
					errs <- fmt.Errorf("pull: %d %s", resp.Code, resp.Remark)
					return
				}
				if i%25 == 0 {
					rc.call(req(wire.CodeQueryConsumerOffset, map[string]string{"consumerGroup": "g", "topic": "t", "queueId": strconv.Itoa(q)}, nil))
					rc.call(req(wire.CodeLockBatchMQ, nil, []byte(`{"consumerGroup":"g","clientId":"`+client+`","mqSet":[{"topic":"t","brokerName":"broker-a","queueId":`+strconv.Itoa(q)+`}]}`)))
				}
			}
			rc.c.Close()
		}(w)
	}
	stop := make(chan struct{})
	var rwg sync.WaitGroup
	rwg.Add(1)
	go func() {
		defer rwg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			q := i % 4
			if max := b.Server.Core().Store().MaxOffset("t", q); max > 0 {
				_, _ = b.Server.Core().Offsets().Reset("g", "t", q, max/2)
				b.Server.Core().Arrivals().Wake("t", q)
			}
		}
	}()
	wg.Wait()
	close(stop)
	rwg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, uint64(workers*sends), b.Server.Core().Store().Stats().Messages)
	require.Eventually(t, func() bool { return len(b.Server.Core().Consumers().Clients("g")) == 0 }, 5*time.Second, 10*time.Millisecond)
}
