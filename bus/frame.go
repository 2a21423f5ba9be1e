package bus

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
)

// A frame is a 4-byte big-endian length n followed by n bytes: a type byte
// and the type's fields. Fixed-size binary fields rather than JSON lines
// keep the fast path (one message to many members) to a single copy and
// let a payload hold any bytes, newlines included.
//
//	clientHello  version u16, pid u32, flags u8
//	serverHello  version u16, pid u32, epoch u64, since i64 (Unix ns),
//	             mode u8, nextSeq u64, maxMsg u32, name (rest)
//	publish      id u64, payload (rest)
//	ack          id u64, seq u64
//	message      epoch u64, seq u64, pid u32, payload (rest)
//	request      id u64, payload (rest)
//	reply        id u64, status u8, payload or error text (rest)
//	bye          reason u8, lastSeq u64, text (rest)
type frameType byte

const (
	fClientHello frameType = 1 + iota
	fServerHello
	fPublish
	fAck
	fMessage
	fRequest
	fReply
	fBye
)

const (
	protoVersion = 1
	headerLen    = 4
	// frameSlack is more than the fixed fields of any frame, so that a
	// frame carrying a maximum-size payload stays under the frame limit.
	frameSlack = 64
	// DefaultMaxMessageSize is the largest payload a leader accepts unless
	// told otherwise with MaxMessageSize.
	DefaultMaxMessageSize = 1 << 20
	// maxHelloText bounds the variable part of hellos and byes, which
	// are read before the peer's limit is known.
	maxHelloText = 4096
)

// clientHello flags.
const flagPublishOnly = 1 << 0

// reply status.
const (
	replyOK byte = iota
	replyErr
	replyNoHandler
	replyTooLarge
)

// bye reasons.
const (
	byeStepDown byte = 1 + iota
	byeSlow
	byeProtocol
	byeTooLarge
	byeRefused
	byeClosed
)

func byeErr(reason byte, text string) error {
	var base error
	switch reason {
	case byeStepDown:
		base = ErrLeaderGone
	case byeSlow:
		base = ErrSlowConsumer
	case byeProtocol:
		base = ErrProtocol
	case byeTooLarge:
		base = ErrTooLarge
	case byeRefused:
		base = ErrRefused
	case byeClosed:
		base = ErrClosed
	default:
		base = ErrProtocol
	}
	if text == "" {
		return base
	}
	return fmt.Errorf("%w: %s", base, text)
}

type clientHello struct {
	version uint16
	pid     uint32
	flags   uint8
}

type serverHello struct {
	version uint16
	pid     uint32
	epoch   uint64
	since   int64
	mode    uint8
	nextSeq uint64
	maxMsg  uint32
	name    string
}

type message struct {
	epoch, seq uint64
	pid        uint32
	data       []byte
}

type bye struct {
	reason  byte
	lastSeq uint64
	text    string
}

// frame starts a frame of type t whose fields after the type byte take
// size bytes, in a buffer with room for all of it.
func frame(t frameType, size int) []byte {
	b := make([]byte, headerLen+1, headerLen+1+size)
	binary.BigEndian.PutUint32(b, uint32(1+size))
	b[headerLen] = byte(t)
	return b
}

func (h clientHello) encode() []byte {
	b := frame(fClientHello, 7)
	b = binary.BigEndian.AppendUint16(b, h.version)
	b = binary.BigEndian.AppendUint32(b, h.pid)
	return append(b, h.flags)
}

func (h serverHello) encode() []byte {
	b := frame(fServerHello, 35+len(h.name))
	b = binary.BigEndian.AppendUint16(b, h.version)
	b = binary.BigEndian.AppendUint32(b, h.pid)
	b = binary.BigEndian.AppendUint64(b, h.epoch)
	b = binary.BigEndian.AppendUint64(b, uint64(h.since))
	b = append(b, h.mode)
	b = binary.BigEndian.AppendUint64(b, h.nextSeq)
	b = binary.BigEndian.AppendUint32(b, h.maxMsg)
	return append(b, h.name...)
}

func (m message) encode() []byte {
	b := frame(fMessage, 20+len(m.data))
	b = binary.BigEndian.AppendUint64(b, m.epoch)
	b = binary.BigEndian.AppendUint64(b, m.seq)
	b = binary.BigEndian.AppendUint32(b, m.pid)
	return append(b, m.data...)
}

// encodeID encodes publish and request frames.
func encodeID(t frameType, id uint64, data []byte) []byte {
	b := frame(t, 8+len(data))
	b = binary.BigEndian.AppendUint64(b, id)
	return append(b, data...)
}

func encodeAck(id, seq uint64) []byte {
	b := frame(fAck, 16)
	b = binary.BigEndian.AppendUint64(b, id)
	return binary.BigEndian.AppendUint64(b, seq)
}

func encodeReply(id uint64, status byte, data []byte) []byte {
	b := frame(fReply, 9+len(data))
	b = binary.BigEndian.AppendUint64(b, id)
	b = append(b, status)
	return append(b, data...)
}

func (y bye) encode() []byte {
	if len(y.text) > maxHelloText {
		y.text = y.text[:maxHelloText]
	}
	b := frame(fBye, 9+len(y.text))
	b = append(b, y.reason)
	b = binary.BigEndian.AppendUint64(b, y.lastSeq)
	return append(b, y.text...)
}

func short(t frameType, body []byte) error {
	return fmt.Errorf("%w: %d-byte body too short for frame type %d", ErrProtocol, len(body), t)
}

func decodeClientHello(body []byte) (clientHello, error) {
	if len(body) < 7 {
		return clientHello{}, short(fClientHello, body)
	}
	return clientHello{
		version: binary.BigEndian.Uint16(body),
		pid:     binary.BigEndian.Uint32(body[2:]),
		flags:   body[6],
	}, nil
}

func decodeServerHello(body []byte) (serverHello, error) {
	if len(body) < 35 {
		return serverHello{}, short(fServerHello, body)
	}
	be := binary.BigEndian
	return serverHello{
		version: be.Uint16(body),
		pid:     be.Uint32(body[2:]),
		epoch:   be.Uint64(body[6:]),
		since:   int64(be.Uint64(body[14:])),
		mode:    body[22],
		nextSeq: be.Uint64(body[23:]),
		maxMsg:  be.Uint32(body[31:]),
		name:    string(body[35:]),
	}, nil
}

// decodeMessage returns a message whose data aliases body.
func decodeMessage(body []byte) (message, error) {
	if len(body) < 20 {
		return message{}, short(fMessage, body)
	}
	be := binary.BigEndian
	return message{epoch: be.Uint64(body), seq: be.Uint64(body[8:]), pid: be.Uint32(body[16:]), data: body[20:]}, nil
}

// decodeID decodes publish and request frames; data aliases body.
func decodeID(t frameType, body []byte) (uint64, []byte, error) {
	if len(body) < 8 {
		return 0, nil, short(t, body)
	}
	return binary.BigEndian.Uint64(body), body[8:], nil
}

func decodeAck(body []byte) (id, seq uint64, err error) {
	if len(body) < 16 {
		return 0, 0, short(fAck, body)
	}
	return binary.BigEndian.Uint64(body), binary.BigEndian.Uint64(body[8:]), nil
}

func decodeReply(body []byte) (id uint64, status byte, data []byte, err error) {
	if len(body) < 9 {
		return 0, 0, nil, short(fReply, body)
	}
	return binary.BigEndian.Uint64(body), body[8], body[9:], nil
}

func decodeBye(body []byte) (bye, error) {
	if len(body) < 9 {
		return bye{}, short(fBye, body)
	}
	return bye{reason: body[0], lastSeq: binary.BigEndian.Uint64(body[1:]), text: string(body[9:])}, nil
}

// frameReader reads frames into one reused buffer: a body it returns is
// valid only until the next call.
type frameReader struct {
	r   *bufio.Reader
	max int // largest frame body accepted
	buf []byte
}

// A connection's read and write buffers come from pools and go back when
// it ends: a primary that serves thousands of short connections (the
// single-instance launches of package instance) then allocates them once,
// not 96KB per connection for the collector to clear.
var (
	readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 64<<10) }}
	writers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 32<<10) }}
)

func newFrameReader(r io.Reader, max int) *frameReader {
	br := readers.Get().(*bufio.Reader)
	br.Reset(r)
	return &frameReader{r: br, max: max}
}

// release gives the reader's buffer back; fr is not read after. A body
// it returned stays valid (it is in fr.buf, not in the buffer).
func (fr *frameReader) release() {
	fr.r.Reset(nil)
	readers.Put(fr.r)
	fr.r = nil
}

// newWriter is a pooled bufio.Writer on w; putWriter gives it back.
func newWriter(w io.Writer) *bufio.Writer {
	bw := writers.Get().(*bufio.Writer)
	bw.Reset(w)
	return bw
}

func putWriter(bw *bufio.Writer) {
	bw.Reset(nil)
	writers.Put(bw)
}

// next returns the next frame. A clean end between frames is io.EOF; an
// end inside a frame, a zero length or an unknown type is ErrProtocol; a
// length above the limit is ErrTooLarge, and the stream cannot be resumed
// after any error.
func (fr *frameReader) next() (frameType, []byte, error) {
	var hdr [headerLen]byte
	if _, err := io.ReadFull(fr.r, hdr[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return 0, nil, fmt.Errorf("%w: truncated frame header", ErrProtocol)
		}
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	switch {
	case n == 0:
		return 0, nil, fmt.Errorf("%w: empty frame", ErrProtocol)
	case uint64(n) > uint64(fr.max):
		return 0, nil, fmt.Errorf("%w: %d-byte frame exceeds the limit of %d", ErrTooLarge, n, fr.max)
	}
	if cap(fr.buf) < int(n) {
		fr.buf = make([]byte, n)
	}
	b := fr.buf[:n]
	if _, err := io.ReadFull(fr.r, b); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return 0, nil, fmt.Errorf("%w: truncated frame (%d-byte body)", ErrProtocol, n)
		}
		return 0, nil, err
	}
	t := frameType(b[0])
	if t < fClientHello || t > fBye {
		return 0, nil, fmt.Errorf("%w: unknown frame type %d", ErrProtocol, t)
	}
	return t, b[1:], nil
}
