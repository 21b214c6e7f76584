package main

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/brokercore/brokercore/acl"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
)

// defaultTimeout bounds one request: dial, write and answer.
const defaultTimeout = 5 * time.Second

// errRemote is a request the server answered with a non-zero code.
var errRemote = errors.New("mqadmin: request refused")

// remoteError is a refused request: Apache's response code and remark.
type remoteError struct {
	Addr   string
	Code   int16 // the request code
	Answer int16 // the response code
	Remark string
}

func (e *remoteError) Error() string {
	return fmt.Sprintf("%s answered request %d with code %d: %s", e.Addr, e.Code, e.Answer, e.Remark)
}

func (e *remoteError) Unwrap() error { return errRemote }

// client sends remoting requests, one connection per request: mqadmin
// makes a handful of calls and exits.
type client struct {
	timeout time.Duration
	opaque  atomic.Int32
	// accessKey and secretKey sign every request as the v2 client does
	// (AccessKey and Signature fields) when the broker runs with ACL; ""
	// sends unsigned requests.
	accessKey, secretKey string
}

// invoke sends one request to addr and returns its answer. A non-zero
// response code is a *remoteError, except the codes listed in okCodes.
func (c *client) invoke(addr string, code int16, ext map[string]string, body []byte, okCodes ...int16) (*wire.Command, error) {
	nc, err := net.DialTimeout("tcp", addr, c.timeout)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", addr, err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(c.timeout))
	ext = c.sign(ext, body)
	req := &wire.Command{Code: code, Language: "JAVA", Version: 317, Opaque: c.opaque.Add(1), ExtFields: ext, Body: body}
	frame, err := wire.Encode(req)
	if err != nil {
		return nil, err
	}
	if _, err := nc.Write(frame); err != nil {
		return nil, fmt.Errorf("write to %s: %w", addr, err)
	}
	r := bufio.NewReader(nc)
	for {
		raw, err := wire.ReadFrame(r, wire.DefaultMaxFrame)
		if err != nil {
			return nil, fmt.Errorf("read from %s: %w", addr, err)
		}
		resp, err := wire.Decode(raw)
		if err != nil {
			return nil, fmt.Errorf("answer from %s: %w", addr, err)
		}
		if !resp.IsResponse() || resp.Opaque != req.Opaque {
			continue // a server-initiated request (never expected here)
		}
		if resp.Code != wire.Success {
			for _, ok := range okCodes {
				if resp.Code == ok {
					return resp, nil
				}
			}
			return nil, &remoteError{Addr: addr, Code: code, Answer: resp.Code, Remark: resp.Remark}
		}
		return resp, nil
	}
}

// sign is a copy of ext with the AccessKey and Signature fields of the
// client's credentials (none without them).
func (c *client) sign(ext map[string]string, body []byte) map[string]string {
	out := make(map[string]string, len(ext)+2)
	for k, v := range ext {
		out[k] = v
	}
	if c.accessKey != "" {
		out[acl.FieldAccessKey] = c.accessKey
		out[acl.FieldSignature] = acl.SignRemoting(c.secretKey, out, body)
	}
	return out
}
