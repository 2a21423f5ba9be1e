package instance

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The bus carries two requests, in a compact binary form (JSON cost a
// forward a quarter of its time in decoding). Byte strings travel as they
// are, so arguments, paths and variables keep their exact bytes, valid
// UTF-8 or not:
//
//	submit  {op, id, args, cwd, env, deadline}  ->  {accepted}
//	wait    {op, id, out, err}                  ->  {out, err, done, exit, abandoned}
//	stdin   {op, id, data, eof}                 ->  {} once the application has read it
//	part    {op, id, data, eof}                 ->  {}, and for the last part submit's reply
//
// submit returns once the primary's application has taken the invocation
// (the first phase); wait returns as soon as there is output past the
// offsets the caller has, or the invocation is done (the second phase),
// and is repeated until done. Both are idempotent: a repeated submit of a
// known id never delivers it again, and a repeated wait returns the same
// bytes from the same offsets.
//
// A submit larger than partSize (arguments and variables of any size, as
// `find -exec app {} +` makes) is sent as consecutive parts of its
// encoding, on one connection: the primary joins them and handles the
// last part as that submit. Parts of a connection that ends are dropped.
//
// Request: version u8, op u8, deadline i64, out i64, err i64, then the
// byte strings id, cwd, each arg, each env (u32 length + bytes), with a
// u32 count before args and before env, then flags u8 (stdin follows,
// end of stdin) and the byte string data (a piece of stdin). Reply: flags u8 (accepted,
// done, abandoned), exit i32, out and err as byte strings.
type wireRequest struct {
	Op       byte
	ID       string
	Args     [][]byte
	Cwd      []byte
	Env      [][]byte
	Deadline int64 // Unix ns: do not deliver later
	Out      int64
	Err      int64
	Stdin    bool   // submit: the caller will send its stdin
	Data     []byte // stdin: the next bytes of it
	EOF      bool   // stdin: the end of it
}

type wireReply struct {
	Accepted  bool
	Out       []byte
	Err       []byte
	Done      bool
	Exit      int
	Abandoned bool
}

const (
	wireVersion = 1
	opSubmit    = 1
	opWait      = 2
	opStdin     = 3
	opPart      = 4
	// partSize is the largest piece of a submit sent in one request,
	// well under the bus's 1 MiB message limit.
	partSize = 256 << 10
	// maxSubmit bounds the encoded size of one invocation a primary
	// accepts in parts: arguments, working directory and forwarded
	// variables, each with 4 bytes of length. Linux's own bound on
	// argv and environment together is 6 MiB at most (a quarter of the
	// stack limit, capped at three quarters of 8 MiB).
	maxSubmit = 64 << 20
	// maxChunk bounds the output of one wait reply, each stream, so that
	// it stays under the bus's 1 MiB message limit.
	maxChunk = 256 << 10
)

const (
	flagAccepted = 1 << iota
	flagDone
	flagAbandoned
)

var be = binary.BigEndian

func appendBytes(b, s []byte) []byte {
	b = be.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

func (r wireRequest) encode() []byte {
	n := 32 + len(r.ID) + len(r.Cwd)
	for _, a := range r.Args {
		n += 4 + len(a)
	}
	for _, e := range r.Env {
		n += 4 + len(e)
	}
	b := make([]byte, 0, n+16)
	b = append(b, wireVersion, r.Op)
	b = be.AppendUint64(b, uint64(r.Deadline))
	b = be.AppendUint64(b, uint64(r.Out))
	b = be.AppendUint64(b, uint64(r.Err))
	b = appendBytes(b, []byte(r.ID))
	b = appendBytes(b, r.Cwd)
	b = be.AppendUint32(b, uint32(len(r.Args)))
	for _, a := range r.Args {
		b = appendBytes(b, a)
	}
	b = be.AppendUint32(b, uint32(len(r.Env)))
	for _, e := range r.Env {
		b = appendBytes(b, e)
	}
	var f byte
	if r.Stdin {
		f |= 1
	}
	if r.EOF {
		f |= 2
	}
	b = append(b, f)
	return appendBytes(b, r.Data)
}

func (r wireReply) encode() []byte {
	var f byte
	if r.Accepted {
		f |= flagAccepted
	}
	if r.Done {
		f |= flagDone
	}
	if r.Abandoned {
		f |= flagAbandoned
	}
	b := make([]byte, 0, 13+len(r.Out)+len(r.Err))
	b = append(b, f)
	b = be.AppendUint32(b, uint32(int32(r.Exit)))
	b = appendBytes(b, r.Out)
	return appendBytes(b, r.Err)
}

var errShort = errors.New("truncated")

// reader takes fields off a message; the first failure sticks.
type reader struct {
	b   []byte
	err error
}

func (r *reader) u8() byte {
	if r.err != nil || len(r.b) < 1 {
		r.err = errShort
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *reader) u32() uint32 {
	if r.err != nil || len(r.b) < 4 {
		r.err = errShort
		return 0
	}
	v := be.Uint32(r.b)
	r.b = r.b[4:]
	return v
}

func (r *reader) u64() uint64 {
	if r.err != nil || len(r.b) < 8 {
		r.err = errShort
		return 0
	}
	v := be.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

// bytes returns a copy: messages belong to the bus's buffers.
func (r *reader) bytes() []byte {
	n := r.u32()
	if r.err != nil || uint64(n) > uint64(len(r.b)) {
		r.err = errShort
		return nil
	}
	v := append([]byte{}, r.b[:n]...)
	r.b = r.b[n:]
	return v
}

func (r *reader) list() [][]byte {
	n := r.u32()
	if r.err != nil || uint64(n)*4 > uint64(len(r.b)) {
		r.err = errShort
		return nil
	}
	var out [][]byte
	for range n {
		out = append(out, r.bytes())
	}
	return out
}

func decodeRequest(b []byte) (wireRequest, error) {
	r := &reader{b: b}
	var q wireRequest
	if v := r.u8(); r.err == nil && v != wireVersion {
		return q, fmt.Errorf("instance: request of version %d, this primary speaks %d", v, wireVersion)
	}
	q.Op = r.u8()
	q.Deadline, q.Out, q.Err = int64(r.u64()), int64(r.u64()), int64(r.u64())
	q.ID = string(r.bytes())
	q.Cwd = r.bytes()
	q.Args = r.list()
	q.Env = r.list()
	f := r.u8()
	q.Stdin, q.EOF = f&1 != 0, f&2 != 0
	q.Data = r.bytes()
	if r.err != nil {
		return q, fmt.Errorf("instance: malformed request: %w", r.err)
	}
	if q.ID == "" || len(q.ID) > 128 {
		return q, fmt.Errorf("instance: malformed request: id of %d bytes", len(q.ID))
	}
	return q, nil
}

func decodeReply(b []byte) (wireReply, error) {
	r := &reader{b: b}
	f := r.u8()
	rep := wireReply{Accepted: f&flagAccepted != 0, Done: f&flagDone != 0, Abandoned: f&flagAbandoned != 0}
	rep.Exit = int(int32(r.u32()))
	rep.Out = r.bytes()
	rep.Err = r.bytes()
	if r.err != nil {
		return rep, fmt.Errorf("instance: malformed reply: %w", r.err)
	}
	return rep, nil
}
