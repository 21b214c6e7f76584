package grpcapi_test

import (
	"fmt"
	"os"

	"github.com/brokercore/brokercore"
	"github.com/brokercore/brokercore/examples/rocketmq/grpcapi"
)

// Example serves RocketMQ 5 clients from a brokercore core on a free
// loopback port; a v5 client's Config.Endpoint is srv.Addr().
func Example() {
	dir, _ := os.MkdirTemp("", "grpcapi-example")
	defer os.RemoveAll(dir)
	core, err := brokercore.Open(dir, brokercore.Options{})
	if err != nil {
		panic(err)
	}
	defer core.Close()
	srv, err := grpcapi.Start(core, "127.0.0.1:0", grpcapi.Options{CertDir: dir})
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	fmt.Println(srv.Addr() != "")
	// Output: true
}
