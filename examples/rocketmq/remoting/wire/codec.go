package wire

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// Serialize types: the high byte of a frame's header-length word.
const (
	SerializeJSON     byte = 0
	SerializeRocketMQ byte = 1
)

// Flag bits of a command.
const (
	FlagResponse int32 = 1 << 0
	FlagOneway   int32 = 1 << 1
)

// Frame limits.
const (
	// DefaultMaxFrame bounds a frame (everything after its 4-byte length):
	// RocketMQ's default of 16 MiB.
	DefaultMaxFrame = 16 << 20
	// MaxHeader bounds a header: the length field has 24 bits.
	MaxHeader = 1<<24 - 1
	// ProtocolVersion is what the broker puts in its answers (any value works
	// for the client; it stores it as the broker version).
	ProtocolVersion = 317
)

var (
	// ErrFrame reports broken framing: a length out of range or a truncated
	// frame. The connection cannot be resynchronised and is closed.
	ErrFrame = errors.New("remoting: broken frame")
	// ErrHeader reports a well-framed command whose header cannot be decoded
	// (not JSON, unknown serialize type, truncated binary header). The frame
	// boundary is intact, so the connection can answer and go on.
	ErrHeader = errors.New("remoting: bad header")
)

// Command is one remoting command, request or response.
type Command struct {
	Code      int16
	Language  string
	Version   int16
	Opaque    int32
	Flag      int32
	Remark    string
	ExtFields map[string]string
	Body      []byte
	// Serialize is the header codec the command arrived in (or is to be
	// written in).
	Serialize byte
}

// IsResponse reports whether the response bit is set.
func (c *Command) IsResponse() bool { return c.Flag&FlagResponse != 0 }

// IsOneway reports whether the oneway bit is set.
func (c *Command) IsOneway() bool { return c.Flag&FlagOneway != 0 }

// jsonHeader is the JSON form of a header. extFields values must be JSON
// strings for the client to decode them.
type jsonHeader struct {
	Code      int16             `json:"code"`
	Language  string            `json:"language"`
	Version   int16             `json:"version"`
	Opaque    int32             `json:"opaque"`
	Flag      int32             `json:"flag"`
	Remark    string            `json:"remark,omitempty"`
	ExtFields map[string]string `json:"extFields,omitempty"`
}

// ReadFrame reads one frame (without its 4-byte length) from r. A length
// below 4 or above maxFrame is ErrFrame.
func ReadFrame(r *bufio.Reader, maxFrame int) ([]byte, error) {
	var lb [4]byte
	if _, err := io.ReadFull(r, lb[:]); err != nil {
		return nil, err
	}
	n := int64(int32(binary.BigEndian.Uint32(lb[:])))
	if n < 4 || n > int64(maxFrame) {
		return nil, fmt.Errorf("%w: frame length %d outside [4, %d]", ErrFrame, n, maxFrame)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(r, buf); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, fmt.Errorf("%w: truncated frame: %v", ErrFrame, err)
		}
		return nil, err
	}
	return buf, nil
}

// Decode decodes a frame (the bytes after the 4-byte total length). An
// error wrapping ErrFrame means the frame's own lengths are inconsistent;
// ErrHeader means the header cannot be decoded but the body boundary is
// known. Decode never panics.
func Decode(frame []byte) (*Command, error) {
	if len(frame) < 4 {
		return nil, fmt.Errorf("%w: frame of %d bytes has no header length", ErrFrame, len(frame))
	}
	word := binary.BigEndian.Uint32(frame)
	ser := byte(word >> 24)
	hl := int(word & 0xFFFFFF)
	if hl > len(frame)-4 {
		return nil, fmt.Errorf("%w: header length %d exceeds frame of %d bytes", ErrFrame, hl, len(frame))
	}
	header := frame[4 : 4+hl]
	var cmd *Command
	var err error
	switch ser {
	case SerializeJSON:
		cmd, err = decodeJSONHeader(header)
	case SerializeRocketMQ:
		cmd, err = decodeBinaryHeader(header)
	default:
		err = fmt.Errorf("%w: unknown serialize type %d", ErrHeader, ser)
	}
	if err != nil {
		return nil, err
	}
	cmd.Serialize = ser
	if body := frame[4+hl:]; len(body) > 0 {
		cmd.Body = body
	}
	return cmd, nil
}

func decodeJSONHeader(b []byte) (*Command, error) {
	if cmd, ok := fastDecodeHeader(b); ok {
		return cmd, nil
	}
	return decodeJSONHeaderStd(b)
}

// decodeJSONHeaderStd decodes a header with encoding/json.
func decodeJSONHeaderStd(b []byte) (*Command, error) {
	// What the client sends: every extFields value a string.
	var h struct {
		Code      *int16            `json:"code"`
		Language  string            `json:"language"`
		Version   int16             `json:"version"`
		Opaque    int32             `json:"opaque"`
		Flag      int32             `json:"flag"`
		Remark    string            `json:"remark"`
		ExtFields map[string]string `json:"extFields"`
	}
	if err := json.Unmarshal(b, &h); err == nil && h.Code != nil {
		return &Command{Code: *h.Code, Language: h.Language, Version: h.Version, Opaque: h.Opaque, Flag: h.Flag,
			Remark: h.Remark, ExtFields: h.ExtFields}, nil
	}
	// Slow path: decode extFields loosely, so a number there is kept as
	// text (and validated like any value) instead of failing the header.
	var raw struct {
		Code      *int16                     `json:"code"`
		Language  json.RawMessage            `json:"language"`
		Version   int16                      `json:"version"`
		Opaque    int32                      `json:"opaque"`
		Flag      int32                      `json:"flag"`
		Remark    string                     `json:"remark"`
		ExtFields map[string]json.RawMessage `json:"extFields"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("%w: header is not a JSON command: %v", ErrHeader, err)
	}
	if raw.Code == nil {
		return nil, fmt.Errorf("%w: header has no code", ErrHeader)
	}
	cmd := &Command{Code: *raw.Code, Version: raw.Version, Opaque: raw.Opaque, Flag: raw.Flag, Remark: raw.Remark}
	var lang string
	if json.Unmarshal(raw.Language, &lang) == nil {
		cmd.Language = lang
	} else if len(raw.Language) > 0 {
		cmd.Language = string(raw.Language)
	}
	if raw.ExtFields != nil {
		cmd.ExtFields = make(map[string]string, len(raw.ExtFields))
		for k, v := range raw.ExtFields {
			var s string
			if err := json.Unmarshal(v, &s); err != nil {
				// A number or boolean: keep its text, the handler
				// validates it like any other value.
				s = string(v)
			}
			cmd.ExtFields[k] = s
		}
	}
	return cmd, nil
}

// binary header: code int16, language byte, version int16, opaque int32,
// flag int32, remark int32+bytes, extFields int32+bytes (each key int16+bytes,
// value int32+bytes).
func decodeBinaryHeader(b []byte) (*Command, error) {
	d := binReader{b: b}
	cmd := &Command{}
	cmd.Code = int16(d.u16())
	cmd.Language = languageName(d.u8())
	cmd.Version = int16(d.u16())
	cmd.Opaque = int32(d.u32())
	cmd.Flag = int32(d.u32())
	cmd.Remark = string(d.bytes32())
	ext := d.bytes32()
	if d.err != nil {
		return nil, fmt.Errorf("%w: binary header: %v", ErrHeader, d.err)
	}
	if len(ext) > 0 {
		cmd.ExtFields = make(map[string]string)
		e := binReader{b: ext}
		for e.err == nil && len(e.b) > 0 {
			k := e.bytes16()
			v := e.bytes32()
			if e.err == nil {
				cmd.ExtFields[string(k)] = string(v)
			}
		}
		if e.err != nil {
			return nil, fmt.Errorf("%w: binary extFields: %v", ErrHeader, e.err)
		}
	}
	return cmd, nil
}

var languages = []string{"JAVA", "CPP", "DOTNET", "PYTHON", "DELPHI", "ERLANG", "RUBY", "OTHER", "HTTP", "GO", "PHP", "OMS", "RUST", "NODE_JS"}

func languageName(b byte) string {
	if int(b) < len(languages) {
		return languages[b]
	}
	return "UNKNOWN(" + strconv.Itoa(int(b)) + ")"
}

func languageCode(s string) byte {
	for i, l := range languages {
		if l == s {
			return byte(i)
		}
	}
	return 9 // GO
}

type binReader struct {
	b   []byte
	err error
}

func (r *binReader) need(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b) {
		r.err = fmt.Errorf("need %d bytes, have %d", n, len(r.b))
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *binReader) u8() byte {
	if v := r.need(1); v != nil {
		return v[0]
	}
	return 0
}

func (r *binReader) u16() uint16 {
	if v := r.need(2); v != nil {
		return binary.BigEndian.Uint16(v)
	}
	return 0
}

func (r *binReader) u32() uint32 {
	if v := r.need(4); v != nil {
		return binary.BigEndian.Uint32(v)
	}
	return 0
}

func (r *binReader) u64() uint64 {
	if v := r.need(8); v != nil {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

func (r *binReader) bytes16() []byte { return r.need(int(int16(r.u16()))) }
func (r *binReader) bytes32() []byte { return r.need(int(int32(r.u32()))) }

// Encode returns the whole frame of cmd, its 4-byte length included, with
// the header in cmd.Serialize's codec.
func Encode(cmd *Command) ([]byte, error) {
	return AppendFrame(make([]byte, 0, frameSizeHint(cmd)), cmd)
}

// frameSizeHint is about the size of cmd's frame (at least, for the usual
// extFields).
func frameSizeHint(cmd *Command) int {
	return 136 + 32*len(cmd.ExtFields) + len(cmd.Remark) + len(cmd.Body)
}

// AppendFrame appends the whole frame of cmd (as Encode returns it) to dst.
// On error dst is returned unchanged.
func AppendFrame(dst []byte, cmd *Command) ([]byte, error) {
	out, err := AppendFrameHead(dst, cmd)
	if err != nil {
		return dst, err
	}
	return append(out, cmd.Body...), nil
}

// AppendFrameHead appends the frame of cmd up to its body: the lengths
// (counting the body) and the header.
func AppendFrameHead(dst []byte, cmd *Command) ([]byte, error) {
	start := len(dst)
	out := append(dst, 0, 0, 0, 0, 0, 0, 0, 0) // total length, header length: filled in below
	switch cmd.Serialize {
	case SerializeJSON:
		lang := cmd.Language
		if lang == "" {
			lang = "GO"
		}
		out = appendJSONHeader(out, cmd, lang)
	case SerializeRocketMQ:
		out = appendBinaryHeader(out, cmd)
	default:
		return dst, fmt.Errorf("%w: unknown serialize type %d", ErrHeader, cmd.Serialize)
	}
	hl := len(out) - start - 8
	if hl > MaxHeader {
		return dst, fmt.Errorf("%w: header of %d bytes", ErrHeader, hl)
	}
	binary.BigEndian.PutUint32(out[start:], uint32(4+hl+len(cmd.Body)))
	binary.BigEndian.PutUint32(out[start+4:], uint32(cmd.Serialize)<<24|uint32(hl))
	return out, nil
}

func appendBinaryHeader(b []byte, cmd *Command) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(cmd.Code))
	b = append(b, languageCode(cmd.Language))
	b = binary.BigEndian.AppendUint16(b, uint16(cmd.Version))
	b = binary.BigEndian.AppendUint32(b, uint32(cmd.Opaque))
	b = binary.BigEndian.AppendUint32(b, uint32(cmd.Flag))
	b = binary.BigEndian.AppendUint32(b, uint32(len(cmd.Remark)))
	b = append(b, cmd.Remark...)
	at := len(b)
	b = append(b, 0, 0, 0, 0) // extFields length: filled in below
	for k, v := range cmd.ExtFields {
		b = binary.BigEndian.AppendUint16(b, uint16(len(k)))
		b = append(b, k...)
		b = binary.BigEndian.AppendUint32(b, uint32(len(v)))
		b = append(b, v...)
	}
	binary.BigEndian.PutUint32(b[at:], uint32(len(b)-at-4))
	return b
}

// NewResponse returns the response to req with code and remark: same
// opaque and codec, the response bit set.
func NewResponse(req *Command, code int16, remark string) *Command {
	return &Command{Code: code, Language: "GO", Version: ProtocolVersion, Opaque: req.Opaque,
		Flag: FlagResponse, Remark: remark, Serialize: req.Serialize, ExtFields: map[string]string{}}
}
