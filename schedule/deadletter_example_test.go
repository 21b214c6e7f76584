package schedule_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/brokercore/brokercore/schedule"
	"github.com/brokercore/brokercore/store"
)

// ExampleDeadLetterTopic: a record written straight to the schedule topic
// with a real topic the store refuses (300 bytes) does not stop its level:
// it goes to DeadLetterTopic with the reason, and the message behind it is
// delivered.
func ExampleDeadLetterTopic() {
	dir, _ := os.MkdirTemp("", "schedule-example")
	defer os.RemoveAll(dir)
	var clock atomic.Int64
	clock.Store(time.Date(2026, 5, 21, 14, 50, 0, 0, time.UTC).UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()).UTC() }
	log, err := store.Open(filepath.Join(dir, "log"), store.Options{Now: now})
	if err != nil {
		panic(err)
	}
	defer log.Close()
	s, err := schedule.New(log, schedule.Options{Levels: "1s", ProgressPath: filepath.Join(dir, "progress"),
		Now: now, Tick: 5 * time.Millisecond})
	if err != nil {
		panic(err)
	}
	defer s.Close()

	poison := &store.Message{Topic: schedule.Topic, Body: []byte("bad"), Properties: map[string]string{
		schedule.PropRealTopic: strings.Repeat("A", 300), schedule.PropRealQueue: "0"}}
	good, _ := s.Delay(&store.Message{Topic: "orders", Body: []byte("good")}, 1)
	if err := log.Append(poison, good); err != nil {
		panic(err)
	}
	if err := s.Start(); err != nil {
		panic(err)
	}
	clock.Add(int64(2 * time.Second))
	for log.MaxOffset("orders", 0) == 0 {
		time.Sleep(time.Millisecond)
	}
	_ = s.Stop()
	dl, _ := log.Read(schedule.DeadLetterTopic, 0, 0, 1)
	fmt.Println(schedule.DeadLetterTopic, string(dl[0].Body))
	fmt.Println(dl[0].Properties[schedule.PropDLQReason])
	fmt.Println("delivered:", s.Stats().Delivered, "dead-lettered:", s.Stats().DeadLettered)
	// Output:
	// %DLQ%SCHEDULE_CONSUMER bad
	// store: invalid argument: message 0 topic is 300 bytes, limit 255
	// delivered: 1 dead-lettered: 1
}
