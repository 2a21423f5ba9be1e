package bus

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"time"
)

func TestFrameRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	sh := serverHello{version: 1, pid: 42, epoch: 1 << 40, since: -5, mode: 1, nextSeq: 9, maxMsg: 1000, name: "job"}
	m := message{epoch: 3, seq: 4, pid: 5, data: []byte("payload")}
	y := bye{reason: byeSlow, lastSeq: 77, text: "too slow"}
	for _, f := range [][]byte{clientHello{version: 1, pid: 7, flags: flagPublishOnly}.encode(), sh.encode(), m.encode(),
		encodeID(fPublish, 11, []byte("p")), encodeAck(11, 12), encodeReply(13, replyErr, []byte("e")), y.encode()} {
		buf.Write(f)
	}
	fr := newFrameReader(&buf, 1<<20)
	want := []frameType{fClientHello, fServerHello, fMessage, fPublish, fAck, fReply, fBye}
	for i, wt := range want {
		typ, body, err := fr.next()
		if err != nil || typ != wt {
			t.Fatalf("frame %d: type %d, %v; want type %d", i, typ, err, wt)
		}
		switch typ {
		case fClientHello:
			if h, _ := decodeClientHello(body); h != (clientHello{version: 1, pid: 7, flags: flagPublishOnly}) {
				t.Fatalf("%+v", h)
			}
		case fServerHello:
			if h, _ := decodeServerHello(body); h != sh {
				t.Fatalf("%+v", h)
			}
		case fMessage:
			if g, _ := decodeMessage(body); g.epoch != 3 || g.seq != 4 || g.pid != 5 || string(g.data) != "payload" {
				t.Fatalf("%+v", g)
			}
		case fPublish:
			if id, d, _ := decodeID(typ, body); id != 11 || string(d) != "p" {
				t.Fatal(id, d)
			}
		case fAck:
			if id, seq, _ := decodeAck(body); id != 11 || seq != 12 {
				t.Fatal(id, seq)
			}
		case fReply:
			if id, st, d, _ := decodeReply(body); id != 13 || st != replyErr || string(d) != "e" {
				t.Fatal(id, st, d)
			}
		case fBye:
			if g, _ := decodeBye(body); g != y {
				t.Fatalf("%+v", g)
			}
		}
	}
	if _, _, err := fr.next(); err != io.EOF {
		t.Fatalf("after the last frame: %v, want io.EOF", err)
	}
	fr = newFrameReader(bytes.NewReader([]byte{0, 0, 0, 9, 5, 1}), 100)
	if _, _, err := fr.next(); !errors.Is(err, ErrProtocol) {
		t.Fatalf("truncated frame: %v", err)
	}
}

// FuzzFrame feeds arbitrary bytes to the frame reader and every decoder:
// they may reject input, never panic, and a frame that decodes encodes
// back to the same bytes.
func FuzzFrame(f *testing.F) {
	f.Add(clientHello{version: 1, pid: 7}.encode())
	f.Add(serverHello{version: 1, pid: 1, epoch: 2, nextSeq: 1, maxMsg: 64, name: "n"}.encode())
	f.Add(message{epoch: 1, seq: 1, pid: 1, data: []byte("x")}.encode())
	f.Add(append(encodeID(fRequest, 1, []byte("r")), encodeAck(1, 2)...))
	f.Add(bye{reason: byeSlow, text: "t"}.encode())
	f.Add([]byte{0, 0, 0, 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		fr := newFrameReader(bytes.NewReader(b), 4096)
		for {
			typ, body, err := fr.next()
			if err != nil {
				return
			}
			var again []byte
			switch typ {
			case fClientHello:
				if h, err := decodeClientHello(body); err == nil && len(body) == 7 {
					again = h.encode()
				}
			case fServerHello:
				if h, err := decodeServerHello(body); err == nil {
					again = h.encode()
				}
			case fMessage:
				if m, err := decodeMessage(body); err == nil {
					again = m.encode()
				}
			case fPublish, fRequest:
				if id, d, err := decodeID(typ, body); err == nil {
					again = encodeID(typ, id, d)
				}
			case fAck:
				if id, seq, err := decodeAck(body); err == nil && len(body) == 16 {
					again = encodeAck(id, seq)
				}
			case fReply:
				if id, st, d, err := decodeReply(body); err == nil {
					again = encodeReply(id, st, d)
				}
			case fBye:
				if y, err := decodeBye(body); err == nil && len(y.text) <= maxHelloText {
					again = y.encode()
				}
			}
			if again != nil && !bytes.Equal(again[headerLen+1:], body) {
				t.Fatalf("type %d: %x re-encodes as %x", typ, body, again[headerLen+1:])
			}
		}
	})
}

// TestClientSideSlowConsumer: an application that leaves its events unread
// is cut off by its own client, gets what arrived before, the reason, and
// then the leader again with a gap.
func TestClientSideSlowConsumer(t *testing.T) {
	ctx := testCtx(t, 10*time.Second)
	dir := t.TempDir()
	s, _ := startServer(t, dir, 1)
	c := dial(t, ctx, dir, EventBuffer(8))
	if _, err := s.Publish([]byte("0")); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		s.Publish([]byte("more"))
	}
	// Nothing is read until the client has hung up.
	waitMembers(t, ctx, s, 0)
	nextKind(t, ctx, c, EventLeader)
	for i := range 7 {
		if ev := nextKind(t, ctx, c, EventMessage); ev.Message.Seq != uint64(i+1) {
			t.Fatalf("%+v", ev)
		}
	}
	if ev := nextKind(t, ctx, c, EventLost); !errors.Is(ev.Err, ErrSlowConsumer) {
		t.Fatalf("lost: %v", ev.Err)
	}
	if ev := nextKind(t, ctx, c, EventLeader); !ev.Gap || ev.Leader.Epoch != 1 {
		t.Fatalf("back: %+v", ev)
	}
	if err := c.Publish(ctx, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if ev := nextKind(t, ctx, c, EventMessage); ev.Message.Seq != 22 {
		t.Fatalf("%+v", ev)
	}
	c.Close()
	for range c.Events() {
	}
	if err := c.Publish(context.Background(), nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Publish after Close: %v", err)
	}
}
