package elect

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/leaderrun/leaderrun/internal/proctest"
)

// electorRole is an Elector that accepts hand-overs, labelled T_LABEL: it
// prints "leader EPOCH" when it leads, and leads until stdin says
// "release" or closes.
func electorRole() int {
	l, err := Open(Config{Dir: os.Getenv("T_DIR")})
	if err != nil {
		fmt.Println("error", err)
		return 2
	}
	defer l.Close()
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	e := &Elector{Backend: l, Name: os.Getenv("T_NAME"), Request: Request{Labels: []string{os.Getenv("T_LABEL")}}, AcceptHandoff: true}
	err = e.Run(context.Background(), func(ctx context.Context, lead *Leadership) error {
		fmt.Println("leader", lead.Epoch())
		for {
			select {
			case <-ctx.Done():
				fmt.Println("lost", context.Cause(ctx))
				return nil
			case line, ok := <-lines:
				if !ok || line == "release" {
					return nil
				}
			}
		}
	})
	if err != nil {
		fmt.Println("error", err)
		return 2
	}
	fmt.Println("released")
	return 0
}

// TestYieldTo: a leader hands the lock to the waiter labelled "focused",
// third in line, out of turn; the two waiters before it keep their order
// and lead after it, FIFO. A YieldTo with nobody approved keeps leading
// in the same term.
func TestYieldTo(t *testing.T) {
	l, dir := testLocker(t)
	ctx := testCtx(t)
	e := &Elector{Backend: l, Name: "y"}
	leading := make(chan *Leadership, 1)
	ended := make(chan error, 1)
	yielded := make(chan bool, 1)
	focused := func(p Pending) bool { return slices.Contains(p.Labels, "focused") }
	go func() {
		ended <- e.Run(ctx, func(ctx context.Context, lead *Leadership) error {
			leading <- lead
			<-ctx.Done()
			return nil
		})
	}()
	lead := <-leading
	// Nobody waits: no hand-over, the same term.
	if ok, err := e.YieldTo(ctx, focused); ok || err != nil {
		t.Fatalf("alone: YieldTo %v, %v", ok, err)
	}

	var ws []*proctest.Proc
	for i, label := range []string{"hidden", "hidden", "focused"} {
		ws = append(ws, proctest.StartRole(t, fmt.Sprintf("waiter%d-%s", i, label), "elector", "T_DIR="+dir, "T_NAME=y", "T_LABEL="+label))
		proctest.Eventually(t, "waiter queued", func() bool { return len(pending(t, l, "y")) == i+1 })
	}
	want := []int{ws[0].PID(), ws[1].PID(), ws[2].PID()}
	if got := pending(t, l, "y"); !slices.Equal(got, want) {
		t.Fatalf("line %v, want %v", got, want)
	}
	// Nobody approved: still leading, same term.
	if ok, err := e.YieldTo(ctx, func(Pending) bool { return false }); ok || err != nil || e.Leadership() != lead || lead.Err() != nil {
		t.Fatalf("none approved: YieldTo %v, %v; term %v", ok, err, lead.Err())
	}

	go func() {
		ok, err := e.YieldTo(ctx, focused)
		if err != nil {
			t.Error(err)
		}
		yielded <- ok
	}()
	epoch := func(line string) uint64 {
		n, _ := strconv.ParseUint(strings.TrimPrefix(line, "leader "), 10, 64)
		return n
	}
	got := epoch(ws[2].Expect("leader "))
	if !<-yielded {
		t.Fatal("YieldTo returned false, yet the focused waiter leads")
	}
	if err := <-ended; err != nil {
		t.Fatalf("the yielding Elector's Run: %v", err)
	}
	if got <= lead.Epoch() {
		t.Fatalf("the focused waiter's epoch %d is not above %d", got, lead.Epoch())
	}
	// The two passed over are still in line, in their order.
	if q := pending(t, l, "y"); !slices.Equal(q, want[:2]) {
		t.Fatalf("after the hand-over the line is %v, want the two passed over, %v", q, want[:2])
	}
	ws[0].Quiet(100e6)
	// Then FIFO: the first hidden one, then the second.
	ws[2].Send("release")
	ws[2].Expect("released")
	e0 := epoch(ws[0].Expect("leader "))
	ws[1].Quiet(100e6)
	ws[0].Send("release")
	ws[0].Expect("released")
	e1 := epoch(ws[1].Expect("leader "))
	if !(got < e0 && e0 < e1) {
		t.Errorf("epochs %d, %d, %d: not in the order focused, first, second", got, e0, e1)
	}
	ws[1].Send("release")
	ws[1].Expect("released")
}
