// Package pgtest starts real PostgreSQL servers for tests: a cluster made
// by initdb in a temporary directory, served by a postgres child process
// on a Unix socket in that directory and on a free 127.0.0.1 port, with
// TLS. PostgreSQL refuses to run as root, so under root the server runs
// as the postgres system user (or $LEADERRUN_PG_USER). The server can be
// stopped, continued, killed and restarted, always by the pid this package
// started. With CI=true a missing PostgreSQL fails the test instead of
// skipping it.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leaderrun/leaderrun/internal/proctest"
)

// Roles the server is made with. Password is the password of every role.
const (
	Superuser = "postgres"
	User      = "leaderrun" // owns the database, may create the schema
	NoPriv    = "nopriv"    // may log in, may create nothing
	Password  = "s3cret-test"
	Database  = "leaderrun"
)

// BinDir is where initdb and postgres are, or "" when none is found:
// $LEADERRUN_PG_BIN, else the newest /usr/lib/postgresql/N/bin.
func BinDir() string {
	if d := os.Getenv("LEADERRUN_PG_BIN"); d != "" {
		return d
	}
	ms, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	best, bestN := "", 0
	for _, m := range ms {
		n, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(m))))
		if n > bestN {
			best, bestN = filepath.Dir(m), n
		}
	}
	if best == "" {
		if p, err := exec.LookPath("postgres"); err == nil {
			return filepath.Dir(p)
		}
	}
	return best
}

// Require skips tb when PostgreSQL is not installed, or fails it under CI.
func Require(tb testing.TB) string {
	tb.Helper()
	d := BinDir()
	if d == "" {
		if os.Getenv("CI") == "true" {
			tb.Fatal("PostgreSQL not found (install postgresql-15 or set LEADERRUN_PG_BIN); CI must run the PostgreSQL tests")
		}
		tb.Skip("PostgreSQL not found: install postgresql-15 or set LEADERRUN_PG_BIN")
	}
	return d
}

// Server is one postgres process and its data directory.
type Server struct {
	Dir    string // the temporary root, removed by Close
	Data   string
	Socket string // the directory of the Unix socket
	Port   int
	TLS    *TLSFiles

	bin    string
	listen string // listen_addresses
	cred   *syscall.Credential
	mu     sync.Mutex
	cmd    *exec.Cmd
	exit   chan struct{}
}

// Start makes a cluster and starts its server.
func Start() (*Server, error) {
	bin := BinDir()
	if bin == "" {
		return nil, errors.New("pgtest: PostgreSQL not found")
	}
	cred, err := serverCred()
	if err != nil {
		return nil, err
	}
	s := &Server{bin: bin, listen: "127.0.0.1", cred: cred}
	dir, err := os.MkdirTemp("", "leaderrun-pgtest-")
	if err != nil {
		return nil, err
	}
	s.Dir, s.Data, s.Socket = dir, filepath.Join(dir, "data"), filepath.Join(dir, "sock")
	ok := false
	defer func() {
		if !ok {
			s.Close()
		}
	}()
	if err := os.Mkdir(s.Socket, 0o700); err != nil {
		return nil, err
	}
	pw := filepath.Join(dir, "pw")
	if err := os.WriteFile(pw, []byte(Password+"\n"), 0o600); err != nil {
		return nil, err
	}
	if s.TLS, err = makeTLS(dir); err != nil {
		return nil, err
	}
	if err := s.chown(dir, s.Socket, pw, s.TLS.ServerCert, s.TLS.ServerKey, s.TLS.CA); err != nil {
		return nil, err
	}
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", s.Data, "-U", Superuser, "--pwfile", pw,
		"--auth-local=trust", "--auth-host=scram-sha-256", "--no-sync", "-E", "UTF8", "--locale=C")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("pgtest: initdb: %v\n%s", err, out)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s.Port = ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	if err := s.Start(); err != nil {
		return nil, err
	}
	if err := s.setup(); err != nil {
		return nil, err
	}
	ok = true
	return s, nil
}

// serverCred is who the server runs as: under root, $LEADERRUN_PG_USER
// or postgres (PostgreSQL refuses to run as root); else nil, the caller.
func serverCred() (*syscall.Credential, error) {
	if os.Getuid() != 0 {
		return nil, nil
	}
	name := os.Getenv("LEADERRUN_PG_USER")
	if name == "" {
		name = "postgres"
	}
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("pgtest: PostgreSQL does not run as root and there is no user %s to run it as (useradd -r %s, or set LEADERRUN_PG_USER): %w", name, name, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// StartT is Start for one test: the server is closed when tb ends.
func StartT(tb testing.TB) *Server {
	tb.Helper()
	Require(tb)
	s, err := Start()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Close)
	return s
}

func (s *Server) chown(paths ...string) error {
	if s.cred == nil {
		return nil
	}
	for _, p := range paths {
		if err := os.Chown(p, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
			return err
		}
	}
	return nil
}

// setup makes the roles and the database.
func (s *Server) setup() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, s.SocketURL(Superuser, "postgres"))
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	for _, q := range []string{
		"CREATE ROLE " + User + " LOGIN PASSWORD '" + Password + "'",
		"CREATE ROLE " + NoPriv + " LOGIN PASSWORD '" + Password + "'",
		"CREATE DATABASE " + Database + " OWNER " + User,
		"REVOKE ALL ON DATABASE " + Database + " FROM PUBLIC",
		"GRANT CONNECT ON DATABASE " + Database + " TO " + NoPriv,
	} {
		if _, err := c.Exec(ctx, q); err != nil {
			return fmt.Errorf("pgtest: %s: %w", q, err)
		}
	}
	return nil
}

// Start starts the server on its data directory and waits until it
// accepts connections.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return errors.New("pgtest: already running")
	}
	args := []string{"-D", s.Data, "-k", s.Socket, "-p", strconv.Itoa(s.Port),
		"-c", "listen_addresses=" + s.listen, "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		"-c", "max_connections=300", "-c", "shared_buffers=16MB", "-c", "logging_collector=off", "-c", "log_min_messages=fatal",
		"-c", "ssl=on", "-c", "ssl_cert_file=" + s.TLS.ServerCert, "-c", "ssl_key_file=" + s.TLS.ServerKey}
	cmd := exec.Command(filepath.Join(s.bin, "postgres"), args...)
	cmd.SysProcAttr = proctest.ServerAttr(s.cred)
	log, err := os.OpenFile(filepath.Join(s.Dir, "postgres.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		return err
	}
	log.Close()
	exit := make(chan struct{})
	go func() { cmd.Wait(); close(exit) }()
	s.cmd, s.exit = cmd, exit
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		c, err := pgx.Connect(ctx, s.SocketURL(Superuser, "postgres"))
		if err == nil {
			c.Close(ctx)
			cancel()
			return nil
		}
		cancel()
		select {
		case <-exit:
			b, _ := os.ReadFile(filepath.Join(s.Dir, "postgres.log"))
			s.cmd = nil
			return fmt.Errorf("pgtest: postgres exited at start: %s", lastLines(string(b), 10))
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pgtest: postgres not ready within 60s: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func lastLines(s string, n int) string {
	ls := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(ls[max(0, len(ls)-n):], "\n")
}

// PID is the postmaster's pid, 0 when it is not running.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Signal sends sig to the postmaster and every process it forked (each
// backend is a process group of its own: postgres calls setsid in every
// child), such as SIGSTOP and SIGCONT to freeze the whole server.
func (s *Server) Signal(sig syscall.Signal) {
	pid := s.PID()
	if pid == 0 {
		return
	}
	if sig != syscall.SIGCONT {
		syscall.Kill(pid, sig) // first, so that it forks nothing more
	}
	for _, c := range children(pid) {
		syscall.Kill(c, sig)
	}
	if sig == syscall.SIGCONT {
		syscall.Kill(pid, sig)
	}
}

// CPU is the processor time the server has used so far: the postmaster's
// own, its live processes' (backends, checkpointer, autovacuum ...) and
// that of those it has reaped, from /proc in USER_HZ ticks (10 ms).
func (s *Server) CPU() time.Duration {
	pid := s.PID()
	if pid == 0 {
		return 0
	}
	ticks := procTicks(pid, true)
	for _, c := range children(pid) {
		ticks += procTicks(c, false)
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}

// procTicks is utime+stime of pid, and with reaped the cutime+cstime of
// the children it waited for.
func procTicks(pid int, reaped bool) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// After "pid (comm) ": state is field 3, utime 14, stime 15, cutime 16, cstime 17.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 15 {
		return 0
	}
	var sum int64
	last := 12
	if reaped {
		last = 14
	}
	for _, v := range f[11 : last+1] {
		n, _ := strconv.ParseInt(v, 10, 64)
		sum += n
	}
	return sum
}

// children lists the processes whose parent is pid, from /proc.
func children(pid int) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		c, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, c)
		}
	}
	return out
}

// Kill ends the server at once with SIGKILL of its whole process group
// (a crash: no checkpoint, every session gone) and waits for the
// postmaster to exit.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd, exit := s.cmd, s.exit
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	kids := children(cmd.Process.Pid)
	for _, c := range kids {
		syscall.Kill(c, syscall.SIGCONT)
	}
	syscall.Kill(cmd.Process.Pid, syscall.SIGCONT)
	syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
	for _, c := range kids {
		syscall.Kill(c, syscall.SIGKILL) // a backend is a process group of its own
	}
	<-exit
}

// Stop is an immediate shutdown (SIGQUIT, pg_ctl -m immediate): every
// backend exits at once, and the next start recovers from the WAL.
func (s *Server) Stop() {
	s.mu.Lock()
	cmd, exit := s.cmd, s.exit
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	for _, c := range children(cmd.Process.Pid) {
		syscall.Kill(c, syscall.SIGCONT)
	}
	syscall.Kill(cmd.Process.Pid, syscall.SIGCONT)
	cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-exit:
	case <-time.After(20 * time.Second):
		syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
		<-exit
	}
}

// Restart is Stop then Start on the same port and data.
func (s *Server) Restart() error {
	s.Stop()
	return s.Start()
}

// Close kills the server and removes its directory.
func (s *Server) Close() {
	s.Kill()
	if s.Dir != "" {
		os.RemoveAll(s.Dir)
	}
}

// ListenOn makes the server listen on addr too and accept the test roles,
// with their passwords, from cidr (such as a veth pair to a network
// namespace), and restarts it.
func (s *Server) ListenOn(addr, cidr string) error {
	f, err := os.OpenFile(filepath.Join(s.Data, "pg_hba.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(f, "host all all %s scram-sha-256\n", cidr)
	f.Close()
	if err != nil {
		return err
	}
	s.listen = "127.0.0.1," + addr
	return s.Restart()
}

// URLAt is the test role's URL to the test database at addr.
func (s *Server) URLAt(addr string) string {
	return fmt.Sprintf("postgres://%s:%s@%s:%d/%s?sslmode=disable", User, Password, addr, s.Port, Database)
}

// SocketURL is a connection string over the Unix socket (trust auth).
func (s *Server) SocketURL(role, db string) string {
	return fmt.Sprintf("host=%s port=%d user=%s dbname=%s sslmode=disable", s.Socket, s.Port, role, db)
}

// URL is the test role's URL to the test database over TCP on loopback,
// with its password and sslmode=disable.
func (s *Server) URL() string { return s.URLOf(User, Password) }

// URLOf is a TCP URL for role with password.
func (s *Server) URLOf(role, password string) string {
	return fmt.Sprintf("postgres://%s:%s@127.0.0.1:%d/%s?sslmode=disable", role, password, s.Port, Database)
}

// Super connects as the superuser to the test database over the socket.
func (s *Server) Super(tb testing.TB) *pgx.Conn {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, s.SocketURL(Superuser, Database))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// Standby makes a streaming standby of s (pg_basebackup -R over the
// socket, asynchronous) in a directory of its own, on a free port, and
// starts it. Promote it with SELECT pg_promote().
func (s *Server) Standby() (*Server, error) {
	st := &Server{bin: s.bin, listen: "127.0.0.1", cred: s.cred, TLS: s.TLS}
	dir, err := os.MkdirTemp("", "leaderrun-pgtest-standby-")
	if err != nil {
		return nil, err
	}
	st.Dir, st.Data, st.Socket = dir, filepath.Join(dir, "data"), filepath.Join(dir, "sock")
	ok := false
	defer func() {
		if !ok {
			st.Close()
		}
	}()
	if err := os.Mkdir(st.Socket, 0o700); err != nil {
		return nil, err
	}
	if err := st.chown(dir, st.Socket); err != nil {
		return nil, err
	}
	bb := exec.Command(filepath.Join(s.bin, "pg_basebackup"), "-D", st.Data, "-h", s.Socket, "-p", strconv.Itoa(s.Port), "-U", Superuser, "-R", "-X", "stream", "--no-sync", "--checkpoint=fast")
	bb.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	if out, err := bb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("pgtest: pg_basebackup: %v\n%s", err, out)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	st.Port = ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	if err := st.Start(); err != nil {
		return nil, err
	}
	ok = true
	return st, nil
}
