package broker_test

import (
	"fmt"

	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
)

// A request frame as the official client writes it, decoded and answered.
func Example() {
	frame, _ := wire.Encode(&wire.Command{Code: wire.CodeGetMaxOffset, Opaque: 7,
		ExtFields: map[string]string{"topic": "orders", "queueId": "0"}})
	req, err := wire.Decode(frame[4:]) // after the 4-byte length
	if err != nil {
		panic(err)
	}
	resp := wire.NewResponse(req, wire.Success, "")
	resp.ExtFields["offset"] = "42"
	fmt.Println(req.Code, req.ExtFields["topic"], resp.Opaque, resp.IsResponse())
	// Output: 30 orders 7 true
}
