package e2e

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/brokercore/brokercore"
	"github.com/brokercore/brokercore/examples/rocketmq/server"
)

// childOrderly runs an orderly push consumer until SIGTERM (then a graceful
// Shutdown) or SIGKILL.
func childOrderly() int {
	c, err := rocketmq.NewPushConsumer(consumer.WithNameServer([]string{os.Getenv("E2E_NS")}),
		consumer.WithGroupName(os.Getenv("E2E_GROUP")), consumer.WithInstance(os.Getenv("E2E_INSTANCE")),
		consumer.WithConsumerOrder(true), consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	err = c.Subscribe(os.Getenv("E2E_TOPIC"), consumer.MessageSelector{}, func(context.Context, ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		return consumer.ConsumeSuccess, nil
	})
	if err == nil {
		err = c.Start()
	}
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	// SIGTERM is caught before "ready" tells the parent it may send it.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	fmt.Println("ready")
	<-ctx.Done()
	if err := c.Shutdown(); err != nil {
		fmt.Println("error", err)
		return 1
	}
	return 0
}

// childBroker runs the broker until SIGTERM or SIGKILL, at the program's
// collector target (GOGC when set, else server.DefaultGCPercent); with
// E2E_CPUPROFILE it writes a CPU profile of its run there (on SIGTERM).
func childBroker() int {
	return serveChild(func() (func() error, error) {
		gogc, err := server.GCPercent()
		if err != nil {
			return nil, err
		}
		server.SetGCPercent(gogc)
		az, err := childACL()
		if err != nil {
			return nil, err
		}
		s, err := server.Start(server.Config{Dir: os.Getenv("E2E_DIR"), NameSrvAddr: os.Getenv("E2E_NS"),
			BrokerAddr: os.Getenv("E2E_BR"), MetricsAddr: "-", Flush: os.Getenv("E2E_FLUSH"), ACL: az,
			Core: brokercore.Options{Txn: childTxnOptions()}}) // txn_helpers_test.go
		if err != nil {
			return nil, err
		}
		return s.Close, nil
	})
}

// serveChild is a child broker process's life: the CPU profile
// (E2E_CPUPROFILE), start, "ready" for the parent, SIGTERM, stop.
func serveChild(start func() (stop func() error, err error)) int {
	if path := os.Getenv("E2E_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Println("error", err)
			return 1
		}
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}
	closeFn, err := start()
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	// SIGTERM is caught before "ready" tells the parent it may send it.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	fmt.Println("ready")
	<-ctx.Done()
	if err := closeFn(); err != nil {
		fmt.Println("error", err)
		return 1
	}
	return 0
}
