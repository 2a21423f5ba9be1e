package bus

import (
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/internal/proctest"
)

// readBye reads frames until the leader's bye and returns it.
func readBye(t *testing.T, uc *net.UnixConn) bye {
	t.Helper()
	uc.SetReadDeadline(time.Now().Add(10 * time.Second))
	fr := newFrameReader(uc, 1<<21)
	for {
		typ, body, err := fr.next()
		if err != nil {
			t.Fatalf("no bye before: %v", err)
		}
		if typ == fBye {
			y, err := decodeBye(body)
			if err != nil {
				t.Fatal(err)
			}
			return y
		}
	}
}

// TestSlowMemberCutOff: a member that never reads is cut off by the
// leader, whose Publish never blocks, while a member that reads gets
// everything.
func TestSlowMemberCutOff(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	dir := t.TempDir()
	s, _ := startServer(t, dir, 1, QueueLength(256), withGrace(15*time.Second))
	good := dial(t, ctx, dir)
	nextKind(t, ctx, good, EventLeader)
	stuck := rawMember(t, ctx, dir)
	waitMembers(t, ctx, s, 2)

	const n = 8000
	got := make(chan int)
	go func() {
		k := 0
		for k < n {
			select {
			case ev := <-good.Events():
				if ev.Kind != EventMessage || ev.Message.Seq != uint64(k+1) {
					t.Errorf("event %+v at %d", ev, k)
				}
				k++
			case <-ctx.Done():
				got <- k
				return
			}
		}
		got <- k
	}()
	payload := make([]byte, 64)
	start := time.Now()
	for i := range n {
		if _, err := s.Publish(payload); err != nil {
			t.Fatal(err)
		}
		if i%32 == 31 {
			// Pace the burst to what a reading member can take, so that
			// only the stuck one overflows its queue of 256.
			time.Sleep(time.Millisecond)
		}
	}
	if k := <-got; k != n {
		t.Fatalf("the reading member got %d of %d messages", k, n)
	}
	t.Logf("published %d in %v", n, time.Since(start))
	// Reading again within the grace period, it learns why.
	if y := readBye(t, stuck); y.reason != byeSlow {
		t.Fatalf("bye %+v, want the slow-consumer reason", y)
	} else {
		t.Logf("stuck member told: %v", byeErr(y.reason, y.text))
	}
	waitMembers(t, ctx, s, 1)
}

func writeRaw(t *testing.T, uc *net.UnixConn, b []byte) {
	t.Helper()
	if _, err := uc.Write(b); err != nil {
		t.Fatal(err)
	}
}

// TestBadFrames: garbage, truncated and oversized frames end only the
// connection that sent them.
func TestBadFrames(t *testing.T) {
	ctx := testCtx(t, 20*time.Second)
	dir := t.TempDir()
	s, _ := startServer(t, dir, 1, MaxMessageSize(100))
	good := dial(t, ctx, dir)
	nextKind(t, ctx, good, EventLeader)
	sock := filepath.Join(dir, testName+".sock")
	cases := []struct {
		name   string
		hello  bool
		send   []byte
		reason byte
	}{
		{"garbage before hello", false, []byte("GET / HTTP/1.0\r\n\r\n"), byeProtocol},
		{"unknown type", true, []byte{0, 0, 0, 1, 99}, byeProtocol},
		{"empty frame", true, []byte{0, 0, 0, 0}, byeProtocol},
		{"short publish", true, []byte{0, 0, 0, 3, byte(fPublish), 1, 2}, byeProtocol},
		{"server frame from a member", true, encodeAck(1, 1), byeProtocol},
		{"oversized frame", true, binary.BigEndian.AppendUint32(nil, 1<<30), byeTooLarge},
		{"oversized publish", true, encodeID(fPublish, 1, make([]byte, 101)), byeTooLarge},
		{"bad version", false, clientHello{version: 99}.encode(), byeProtocol},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var uc *net.UnixConn
			if tc.hello {
				uc = rawMember(t, ctx, dir)
			} else {
				nc, err := net.Dial("unix", sock)
				if err != nil {
					t.Fatal(err)
				}
				uc = nc.(*net.UnixConn)
				defer uc.Close()
			}
			writeRaw(t, uc, tc.send)
			if y := readBye(t, uc); y.reason != tc.reason {
				t.Fatalf("bye %+v (%v), want reason %d", y, byeErr(y.reason, y.text), tc.reason)
			}
		})
	}
	// A truncated frame followed by hanging up.
	uc := rawMember(t, ctx, dir)
	writeRaw(t, uc, []byte{0, 0, 0, 50, byte(fPublish), 1})
	uc.Close()
	waitMembers(t, ctx, s, 1)

	// The well-behaved member never noticed.
	if _, err := s.Publish([]byte("still here")); err != nil {
		t.Fatal(err)
	}
	if ev := nextKind(t, ctx, good, EventMessage); string(ev.Message.Data) != "still here" || ev.Message.Seq != 1 {
		t.Fatalf("%+v", ev)
	}
	if err := good.Publish(ctx, []byte("me too")); err != nil {
		t.Fatal(err)
	}
	nextKind(t, ctx, good, EventMessage)
}

// TestForeignUIDRefused runs a client as another user against a socket it
// may connect to (the lock directory is opened up to 0755 and the socket
// to 0666 for this test only) and checks that the leader's peer check
// turns it away.
func TestForeignUIDRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a client as another user (CI runs as root)")
	}
	if testing.Short() {
		t.Skip("multi-process test skipped in -short mode")
	}
	ctx := testCtx(t, 20*time.Second)
	_, uid, gid := proctest.User(t, "leaderrun-bus-test", "/nonexistent")

	// The other user must be able to reach both the socket and a copy of
	// the test binary.
	base := proctest.SharedTempDir(t)
	dir := filepath.Join(base, "locks")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	copyExe := proctest.CopyBinary(t, base)
	s, _ := startServer(t, dir, 1)
	sock := filepath.Join(dir, testName+".sock")
	if err := os.Chmod(sock, 0o666); err != nil {
		t.Fatal(err)
	}
	foreign := &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	p := proctest.Start(t, "foreign client", proctest.CommandAt(copyExe, "rawdial", []string{"BUS_SOCK=" + sock}), proctest.Options{Cred: foreign})
	line, _ := p.WaitPrefix(ctx, 0, "")
	want := fmt.Sprintf("refused bus: peer refused: it runs as another user: uid %d may not use a bus of uid 0", uid)
	if line != want {
		t.Fatalf("foreign client: %q, want %q", line, want)
	}
	if n := s.Members(); n != 0 {
		t.Fatalf("%d members after the refusal", n)
	}
	// The same binary as ourselves is let in.
	self := proctest.Start(t, "own client", proctest.CommandAt(copyExe, "rawdial", []string{"BUS_SOCK=" + sock}), proctest.Options{})
	if line, _ := self.WaitPrefix(ctx, 0, ""); line != "hello" {
		t.Fatalf("own client: %q", line)
	}
}
