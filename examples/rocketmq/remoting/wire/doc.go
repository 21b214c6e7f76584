// Package wire is the frame codec of Apache RocketMQ's remoting protocol:
// a frame is a 4-byte length, a 4-byte header length whose high byte is
// the serialize type, a JSON or ROCKETMQ binary header, and the body.
// It holds Command, Decode/Encode/ReadFrame/AppendFrame, the request and
// response codes (codes.go), the properties encoding and the message
// encodings of PULL_MESSAGE bodies and SEND_BATCH_MESSAGE bodies
// (message.go). It does no I/O beyond reading frames from a bufio.Reader
// and has no broker behaviour.
//
// Decoding never panics (FuzzDecode, FuzzFastHeader); a header that cannot
// be decoded is an ErrHeader, broken framing an ErrFrame.
package wire
