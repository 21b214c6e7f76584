package schedule_test

import (
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/brokercore/brokercore/schedule"
	"github.com/brokercore/brokercore/store"
)

// Example delays an order check by level 2 (5 s) and delivers it when an
// injected clock has moved past its due time.
func Example() {
	dir, _ := os.MkdirTemp("", "schedule-example")
	defer os.RemoveAll(dir)

	var clock atomic.Int64 // the injected clock, shared by the log and the scheduler
	clock.Store(time.Date(2026, 5, 21, 14, 50, 0, 0, time.UTC).UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()).UTC() }

	log, err := store.Open(filepath.Join(dir, "log"), store.Options{Now: now})
	if err != nil {
		panic(err)
	}
	defer log.Close()
	s, err := schedule.New(log, schedule.Options{
		ProgressPath: filepath.Join(dir, "schedule.progress"),
		Now:          now,
		Tick:         5 * time.Millisecond,
	})
	if err != nil {
		panic(err)
	}

	delayed, _ := s.Delay(&store.Message{Topic: "orders", Body: []byte("check order 42"),
		Properties: map[string]string{schedule.PropUniqKey: "order-42"}}, 2)
	fmt.Println("waits in", delayed.Topic, "queue", delayed.QueueID)
	if err := log.Append(delayed); err != nil {
		panic(err)
	}

	arrived := make(chan struct{}, 1)
	cancel := log.Subscribe(func(topic string, _ int, _ int64) {
		if topic == "orders" {
			select {
			case arrived <- struct{}{}:
			default:
			}
		}
	})
	defer cancel()
	if err := s.Start(); err != nil {
		panic(err)
	}
	clock.Add(int64(5 * time.Second))
	<-arrived
	if err := s.Stop(); err != nil {
		panic(err)
	}

	msgs, _ := log.Read("orders", 0, 0, 10)
	fmt.Println(string(msgs[0].Body), msgs[0].Properties[schedule.PropUniqKey], len(msgs[0].Properties))
	fmt.Println("level 2 next offset:", s.Progress()[2])
	// Output:
	// waits in SCHEDULE_TOPIC_XXXX queue 1
	// check order 42 order-42 1
	// level 2 next offset: 1
}

// ExampleScheduler_At schedules a message for a time, cancels another, and
// shows the first delivered once the injected clock reaches its time.
func ExampleScheduler_At() {
	dir, _ := os.MkdirTemp("", "schedule-timer-example")
	defer os.RemoveAll(dir)
	var clock atomic.Int64
	clock.Store(time.Date(2026, 5, 21, 14, 50, 0, 0, time.UTC).UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()).UTC() }
	log, err := store.Open(filepath.Join(dir, "log"), store.Options{Now: now})
	if err != nil {
		panic(err)
	}
	defer log.Close()
	s, err := schedule.New(log, schedule.Options{ProgressPath: filepath.Join(dir, "schedule.progress"), Now: now, Tick: 5 * time.Millisecond})
	if err != nil {
		panic(err)
	}
	for _, id := range []string{"remind-1", "remind-2"} {
		m, err := s.At(&store.Message{Topic: "reminders", Body: []byte(id),
			Properties: map[string]string{schedule.PropUniqKey: id}}, now().Add(36*time.Hour))
		if err != nil {
			panic(err)
		}
		if err := log.Append(m); err != nil {
			panic(err)
		}
	}
	fmt.Println("cancel remind-2:", s.Cancel("remind-2"))
	arrived := make(chan struct{}, 1)
	defer log.Subscribe(func(topic string, _ int, _ int64) {
		if topic == "reminders" {
			select {
			case arrived <- struct{}{}:
			default:
			}
		}
	})()
	if err := s.Start(); err != nil {
		panic(err)
	}
	clock.Add(int64(36 * time.Hour))
	<-arrived
	if err := s.Stop(); err != nil {
		panic(err)
	}
	msgs, _ := log.Read("reminders", 0, 0, 10)
	fmt.Println(len(msgs), string(msgs[0].Body))
	fmt.Println("cancel remind-1:", s.Cancel("remind-1"))
	// Output:
	// cancel remind-2: <nil>
	// 1 remind-1
	// cancel remind-1: cancel "remind-1": schedule: timer already delivered
}
