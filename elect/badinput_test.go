package elect

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestInvalidNamesCreateNothing: every entry point refuses a bad name with
// ErrInvalidName and a message that says why, and creates nothing.
func TestInvalidNamesCreateNothing(t *testing.T) {
	l, dir := testLocker(t)
	ctx := testCtx(t)
	for _, tc := range []struct{ name, says string }{
		{"", "the name is empty"},
		{"/", `has '/' at byte 0`},
		{"..", `starts with '.'`},
		{".", `starts with '.'`},
		{"../etc", `starts with '.'`},
		{"a/b", `has '/' at byte 1`},
		{"a\x00b", `has '\x00' at byte 1`},
		{"a\nb", `has '\n' at byte 1`},
		{"job\x1b[31m", `has '\x1b' at byte 3`},
		{"a b", `has ' ' at byte 1`},
		{"ä", `at byte 0`},
		{strings.Repeat("a", MaxNameLen+1), "is 65 bytes long; the limit is 64"},
		{".hidden", `starts with '.'`},
		{"-flag", `starts with '-'`},
	} {
		check := func(op string, err error) {
			t.Helper()
			if !errors.Is(err, ErrInvalidName) || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("%s(%q): %v; want ErrInvalidName saying %q", op, tc.name, err, tc.says)
			}
		}
		_, err := l.Acquire(ctx, tc.name, Request{})
		check("Acquire", err)
		_, _, err = l.TryAcquire(ctx, tc.name, Exclusive)
		check("TryAcquire", err)
		_, err = l.Query(ctx, tc.name)
		check("Query", err)
		check("Prune", l.Prune(ctx, tc.name))
		check("Elector.Run", (&Elector{Backend: l, Name: tc.name}).Run(ctx, func(context.Context, *Leadership) error { return nil }))
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("invalid names created %v", ents)
	}
	if err := ValidateName(strings.Repeat("a", MaxNameLen)); err != nil {
		t.Errorf("a %d-byte name is valid: %v", MaxNameLen, err)
	}
}

// TestCorruptStateRefused: a state file leaderrun did not write gives
// ErrCorrupt naming the file and the way out, and stays as it was.
func TestCorruptStateRefused(t *testing.T) {
	for _, content := range []string{
		"garbage",
		"leaderrun-state v1 seq 3 epo", // truncated
		"leaderrun-state v1 seq 1 epoch 99999999999999999999\n", // epoch overflows
		"leaderrun-state v1 seq -1 epoch 2\n",
		"leaderrun-state v2 seq 1 epoch 1\n",
		"\x00\x01\x02",
	} {
		l, dir := testLocker(t)
		file := filepath.Join(dir, "job"+stateSuffix)
		os.WriteFile(file, []byte(content), 0o600)
		_, err := l.Acquire(testCtx(t), "job", Request{})
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), "nothing was changed") || !strings.Contains(err.Error(), "remove the file") {
			t.Errorf("state %q: %v; want ErrCorrupt naming %s and how to recover", content, err, file)
		}
		if b, _ := os.ReadFile(file); string(b) != content {
			t.Errorf("state %q changed to %q", content, b)
		}
		if left, _ := os.ReadDir(filepath.Join(dir, "job"+queueSuffix)); len(left) != 0 {
			t.Errorf("state %q: the failed request left %v in the queue", content, left)
		}
	}
}

// TestExhaustedEpochRefused: epochs only grow. A state whose epoch cannot
// grow any more (the largest uint64) must not wrap to a smaller epoch.
func TestExhaustedEpochRefused(t *testing.T) {
	l, dir := testLocker(t)
	file := filepath.Join(dir, "job"+stateSuffix)
	content := "leaderrun-state v1 seq 1 epoch 18446744073709551615\n"
	os.WriteFile(file, []byte(content), 0o600)
	lead, err := l.Acquire(testCtx(t), "job", Request{})
	if err == nil {
		defer lead.Release()
		if lead.Epoch() <= math.MaxUint64-1 {
			t.Fatalf("granted epoch %d after epoch %d: epochs went backwards", lead.Epoch(), uint64(math.MaxUint64))
		}
	}
	if !errors.Is(err, ErrCorrupt) {
		t.Errorf("%v; want ErrCorrupt", err)
	}
}

// TestQueueGarbage: foreign, truncated and misnamed entries in the queue
// directory are ignored or cleaned as documented, refused with a clear
// message when they sit where a ticket must be, and never followed.
func TestQueueGarbage(t *testing.T) {
	l, dir := testLocker(t)
	ctx := testCtx(t)
	lead, err := l.Acquire(ctx, "job", Request{}) // makes the files
	if err != nil {
		t.Fatal(err)
	}
	lead.Release()
	q := filepath.Join(dir, "job"+queueSuffix)
	foreignFilesKept(t, ctx, l, q)
	deadGarbageCleaned(t, ctx, l, q)
	plantedTicketsRefused(t, ctx, l, dir, q)
}

// foreignFilesKept: foreign files in the queue that are not tickets are
// ignored and kept.
func foreignFilesKept(t *testing.T, ctx context.Context, l *Locker, q string) {
	t.Helper()
	os.WriteFile(filepath.Join(q, "README"), []byte("notes"), 0o600)
	os.WriteFile(filepath.Join(q, "t123"), []byte("short name"), 0o600)
	os.WriteFile(filepath.Join(q, "t99999999999999999999"), []byte("beyond uint64"), 0o600)
	lead, err := l.Acquire(ctx, "job", Request{})
	if err != nil {
		t.Fatalf("foreign non-ticket files must be ignored: %v", err)
	}
	lead.Release()
	for _, n := range []string{"README", "t123", "t99999999999999999999"} {
		if _, err := os.Stat(filepath.Join(q, n)); err != nil {
			t.Errorf("foreign file %s was lost: %v", n, err)
		}
	}
}

// deadGarbageCleaned: unlocked ticket-named files (non-JSON, truncated
// JSON) and a leftover temporary file: a ticket nobody holds belongs to a
// dead process and is cleaned.
func deadGarbageCleaned(t *testing.T, ctx context.Context, l *Locker, q string) {
	t.Helper()
	os.WriteFile(filepath.Join(q, ticketName(1, false)), []byte("not json"), 0o600)
	os.WriteFile(filepath.Join(q, ticketName(2, false)), []byte(`{"pid":1,"mo`), 0o600)
	os.WriteFile(filepath.Join(q, ".tmp-1-dead"), nil, 0o600)
	s, err := l.Query(ctx, "job")
	if err != nil || len(s.Held)+len(s.Pending) != 0 {
		t.Errorf("query shows garbage as requests: %+v, %v", s, err)
	}
	lead, err := l.Acquire(ctx, "job", Request{})
	if err != nil {
		t.Fatalf("dead garbage tickets must not block: %v", err)
	}
	lead.Release()
	if err := l.Prune(ctx, "job"); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{ticketName(1, false), ticketName(2, false), ".tmp-1-dead"} {
		if _, err := os.Lstat(filepath.Join(q, n)); err == nil {
			t.Errorf("dead %s not cleaned", n)
		}
	}
}

// plantedTicketsRefused: a symlink or a directory named like a ticket
// ahead in the queue is refused, naming the entry and what to do; not
// followed, not removed.
func plantedTicketsRefused(t *testing.T, ctx context.Context, l *Locker, dir, q string) {
	t.Helper()
	outside := filepath.Join(t.TempDir(), "precious")
	os.WriteFile(outside, []byte("precious\n"), 0o600)
	for _, plant := range []struct {
		what string
		make func(p string)
		says string
	}{
		{"symlink", func(p string) { os.Symlink(outside, p) }, "is a symbolic link; remove it"},
		{"directory", func(p string) { os.Mkdir(p, 0o700) }, "is not a regular file; remove it"},
	} {
		p := filepath.Join(q, ticketName(1, false))
		plant.make(p)
		before := snapshotTree(t, dir)
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := l.Acquire(cctx, "job", Request{})
		cancel()
		if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), plant.says) {
			t.Errorf("a %s named like a ticket: %v; want an error naming %s saying %q", plant.what, err, p, plant.says)
		}
		if _, err := l.Query(ctx, "job"); err != nil {
			t.Errorf("query with a %s named like a ticket: %v", plant.what, err)
		}
		if err := l.Prune(ctx, "job"); err == nil || !strings.Contains(err.Error(), plant.says) {
			t.Errorf("prune with a %s named like a ticket: %v", plant.what, err)
		}
		after := snapshotTree(t, dir)
		if stripState(after) != stripState(before) {
			t.Errorf("a %s named like a ticket: directory changed beyond the counter:\nbefore:\n%s\nafter:\n%s", plant.what, before, after)
		}
		if b, _ := os.ReadFile(outside); string(b) != "precious\n" {
			t.Errorf("followed the symlink: %q", b)
		}
		os.Remove(p)
	}
}

// stripState drops the state file's line: a refused request may have
// drawn a ticket number, and numbers are never reused.
func stripState(tree string) string {
	var keep []string
	for _, line := range strings.Split(tree, "\n") {
		if !strings.HasPrefix(line, "job"+stateSuffix+" ") {
			keep = append(keep, line)
		}
	}
	return strings.Join(keep, "\n")
}

// A file planted under the name that the next ticket's beacon takes: the
// join is refused with ErrCorrupt naming it, and the file stays as it was
// (a refused join removes only the names it linked itself).
func TestPlantedBeaconKept(t *testing.T) {
	l, dir := testLocker(t)
	ctx := testCtx(t)
	lead, err := l.Acquire(ctx, "job", Request{}) // makes the files
	if err != nil {
		t.Fatal(err)
	}
	lead.Release()
	b, err := os.ReadFile(filepath.Join(dir, "job"+stateSuffix))
	if err != nil {
		t.Fatal(err)
	}
	s, ok := parseState(b)
	if !ok {
		t.Fatalf("state %q", b)
	}
	q := filepath.Join(dir, "job"+queueSuffix)
	next := ticketName(s.seq+1, false)
	planted := filepath.Join(q, next+beaconSuffix)
	if err := os.WriteFile(planted, []byte("planted\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := l.Acquire(cctx, "job", Request{}); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), planted) {
		t.Errorf("a file planted as the next beacon: %v; want ErrCorrupt naming %s", err, planted)
	}
	if b, err := os.ReadFile(planted); err != nil || string(b) != "planted\n" {
		t.Errorf("the planted file was removed or changed: %q, %v", b, err)
	}
	for _, n := range []string{next, next + inboxSuffix} {
		if _, err := os.Lstat(filepath.Join(q, n)); !os.IsNotExist(err) {
			t.Errorf("the refused join left %s: %v", n, err)
		}
	}
}
