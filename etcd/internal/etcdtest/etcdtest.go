// Package etcdtest starts real etcd servers for tests: each member is a
// child process on 127.0.0.1 ports (or, with Options.Net, on an address
// of a network the test made) with its own data directory, started
// from $LEADERRUN_ETCD_BIN or etcd on PATH. A member can be killed,
// restarted, stopped and continued, always by the pid this package started.
// With CI=true a missing etcd binary fails the test instead of skipping it.
package etcdtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/leaderrun/leaderrun/internal/proctest"
)

// Bin is the etcd binary to run, or "" when there is none:
// $LEADERRUN_ETCD_BIN, else etcd on PATH. LEADERRUN_ETCD_BIN=embed builds
// embedserver (a current etcd: the server module of the client's version)
// once per test binary and runs that.
func Bin() string {
	switch b := os.Getenv("LEADERRUN_ETCD_BIN"); b {
	case "":
	case "embed":
		embedOnce.Do(buildEmbed)
		return embedBin
	default:
		return b
	}
	b, _ := exec.LookPath("etcd")
	return b
}

var (
	embedOnce sync.Once
	embedBin  string
)

// buildEmbed builds embedserver, next to this file, to one path per user
// in the temporary directory: go build's cache makes a rebuild cheap, and
// the build goes to a name of its own that is then renamed over that path,
// so that test binaries building at once do not write a binary another
// one runs.
func buildEmbed() {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return
	}
	out := filepath.Join(os.TempDir(), fmt.Sprintf("leaderrun-embedserver-%d", os.Getuid()))
	tmp := fmt.Sprintf("%s.%d", out, os.Getpid())
	cmd := exec.Command("go", "build", "-o", tmp, ".")
	cmd.Dir = filepath.Join(filepath.Dir(file), "embedserver")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if cmd.Run() == nil && os.Rename(tmp, out) == nil {
		embedBin = out
	}
	os.Remove(tmp)
}

// Require skips tb when no etcd binary is found, or fails it under CI.
func Require(tb testing.TB) string {
	tb.Helper()
	b := Bin()
	if b == "" {
		if os.Getenv("CI") == "true" {
			tb.Fatal("etcd not found (set LEADERRUN_ETCD_BIN or install etcd-server); CI must run the etcd tests")
		}
		tb.Skip("etcd not found: set LEADERRUN_ETCD_BIN or install etcd-server (apt-get install etcd-server)")
	}
	return b
}

// Member is one etcd server process.
type Member struct {
	Name      string
	ClientURL string
	PeerURL   string
	Dir       string
	// ControlURL is where the test process reaches the member: ClientURL,
	// or with Options.Net a unix socket (the test is not in the network).
	ControlURL string

	bin  string
	args []string
	tls  *TLSFiles
	net  *Net
	idx  int
	cwd  string
	mu   sync.Mutex
	cmd  *exec.Cmd
	exit chan struct{}
}

// Cluster is a set of members that form one etcd cluster.
type Cluster struct {
	Members []*Member
	// TLS is set when the cluster serves clients over TLS only
	// (Options.TLS), with client certificates required.
	TLS  *TLSFiles
	root string
}

// Options for Start.
type Options struct {
	// Members in the cluster. Default 1.
	Members int
	// TLS makes the members serve clients over https only, with a
	// certificate of a CA made for the cluster, and require a client
	// certificate of that CA (Cluster.TLS).
	TLS bool
	// Net runs each member in a namespace of its own on the bridge of a
	// network the test made (NewNet), with an address of its own, so that
	// the network's hosts reach them (Endpoints) and a host or a member
	// can be cut off (Net.Cut, MemberName). The test process reaches them
	// on unix sockets (ControlEndpoints). Not with TLS.
	Net *Net
}

// Start starts a cluster and waits until it has a leader. Close ends it.
func Start(opts Options) (*Cluster, error) {
	bin := Bin()
	if bin == "" {
		return nil, errors.New("etcd not found")
	}
	n := max(opts.Members, 1)
	var last error
	for try := 0; try < 3; try++ {
		c, err := start(bin, n, opts.TLS, opts.Net)
		if err == nil {
			return c, nil
		}
		last = err
	}
	return nil, last
}

// StartT is Start for one test: it fails tb if etcd cannot start and
// closes the cluster when tb ends.
func StartT(tb testing.TB, members int) *Cluster {
	tb.Helper()
	Require(tb)
	c, err := Start(Options{Members: members})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(c.Close)
	return c
}

func tempRoot() (string, error) {
	// tmpfs makes etcd's fsyncs free; its WAL pre-allocates 128 MB per member.
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if d, err := os.MkdirTemp("/dev/shm", "leaderrun-etcdtest-"); err == nil {
			return d, nil
		}
	}
	return os.MkdirTemp("", "leaderrun-etcdtest-")
}

func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func start(bin string, n int, withTLS bool, nw *Net) (*Cluster, error) {
	root, err := tempRoot()
	if err != nil {
		return nil, err
	}
	scheme := "http"
	var files *TLSFiles
	if withTLS {
		if files, err = makeTLS(filepath.Join(root, "tls")); err != nil {
			os.RemoveAll(root)
			return nil, err
		}
		scheme = "https"
	}
	ports, err := freePorts(2 * n)
	if err != nil {
		os.RemoveAll(root)
		return nil, err
	}
	c := &Cluster{root: root, TLS: files}
	c.Members = members(bin, n, scheme, ports, root, files, nw)
	for _, m := range c.Members {
		if err := m.Start(); err != nil {
			c.Close()
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.WaitHealthy(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// members makes the n members of a cluster in root: their URLs and
// command lines.
func members(bin string, n int, scheme string, ports []int, root string, files *TLSFiles, nw *Net) []*Member {
	var ms []*Member
	var initial []string
	for i := range n {
		m := &Member{
			Name:      fmt.Sprintf("m%d", i),
			ClientURL: fmt.Sprintf("%s://127.0.0.1:%d", scheme, ports[2*i]),
			PeerURL:   fmt.Sprintf("http://127.0.0.1:%d", ports[2*i+1]),
			Dir:       filepath.Join(root, fmt.Sprintf("m%d", i)),
			bin:       bin,
			tls:       files,
			net:       nw,
			idx:       i,
			cwd:       root,
		}
		m.ControlURL = m.ClientURL
		if nw != nil {
			// Each member has an address of its own: the ports can be
			// etcd's own. The unix socket is made in the member's working
			// directory (etcd takes unix://HOST:PORT as a file name there).
			m.ClientURL = fmt.Sprintf("http://%s:2379", memberIP(i))
			m.PeerURL = fmt.Sprintf("http://%s:2380", memberIP(i))
			m.ControlURL = "unix://" + filepath.Join(root, m.Name+":2379")
		}
		initial = append(initial, m.Name+"="+m.PeerURL)
		ms = append(ms, m)
	}
	for _, m := range ms {
		listen := m.ClientURL
		if nw != nil {
			listen += ",unix://" + m.Name + ":2379"
		}
		m.args = []string{
			"--name", m.Name, "--data-dir", m.Dir,
			"--listen-client-urls", listen, "--advertise-client-urls", m.ClientURL,
			"--listen-peer-urls", m.PeerURL, "--initial-advertise-peer-urls", m.PeerURL,
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new",
			"--initial-cluster-token", filepath.Base(root),
			"--heartbeat-interval", "50", "--election-timeout", "500",
			"--logger", "zap", "--log-level", "error",
		}
		if files != nil {
			m.args = append(m.args, "--cert-file", files.ServerCert, "--key-file", files.ServerKey,
				"--trusted-ca-file", files.CA, "--client-cert-auth")
		}
	}
	return ms
}

// Endpoints are the members' client URLs.
func (c *Cluster) Endpoints() []string {
	var eps []string
	for _, m := range c.Members {
		eps = append(eps, m.ClientURL)
	}
	return eps
}

// ControlEndpoints are the URLs the test process reaches the members on:
// Endpoints, or with Options.Net their unix sockets.
func (c *Cluster) ControlEndpoints() []string {
	var eps []string
	for _, m := range c.Members {
		eps = append(eps, m.ControlURL)
	}
	return eps
}

// Client dials the whole cluster from the test process; tb closes it at
// its end.
func (c *Cluster) Client(tb testing.TB) *clientv3.Client {
	tb.Helper()
	return c.ClientOf(tb, c.ControlEndpoints()...)
}

// ClientOf dials the given endpoints; tb closes it at its end.
func (c *Cluster) ClientOf(tb testing.TB, eps ...string) *clientv3.Client {
	tb.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, Logger: zap.NewNop(), TLS: c.TLS.config()})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cli.Close() })
	return cli
}

// WaitHealthy waits until every running member reports the same leader.
func (c *Cluster) WaitHealthy(ctx context.Context) error {
	for {
		ok, err := c.healthy(ctx)
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("etcd cluster not healthy: %v (%w)", err, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (c *Cluster) healthy(ctx context.Context) (bool, error) {
	var leader uint64
	for _, m := range c.Members {
		if !m.Running() {
			continue
		}
		id, err := m.leader(ctx)
		if err != nil {
			return false, err
		}
		if id == 0 || (leader != 0 && id != leader) {
			return false, errors.New("no agreed leader")
		}
		leader = id
	}
	return leader != 0, nil
}

// Leader returns the member that is the raft leader now.
func (c *Cluster) Leader(ctx context.Context) (*Member, error) {
	for _, m := range c.Members {
		if !m.Running() {
			continue
		}
		cli, err := m.client()
		if err != nil {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		st, err := cli.Status(sctx, m.ControlURL)
		cancel()
		cli.Close()
		if err == nil && st.Leader == st.Header.MemberId {
			return m, nil
		}
	}
	return nil, errors.New("no member is the leader")
}

func (m *Member) client() (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{Endpoints: []string{m.ControlURL}, DialTimeout: 2 * time.Second, Logger: zap.NewNop(), TLS: m.tls.config()})
}

func (m *Member) leader(ctx context.Context) (uint64, error) {
	cli, err := m.client()
	if err != nil {
		return 0, err
	}
	defer cli.Close()
	sctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	st, err := cli.Status(sctx, m.ControlURL)
	if err != nil {
		return 0, err
	}
	return st.Leader, nil
}

// Start starts the member's process (again, after Kill, on the same data).
func (m *Member) Start() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd != nil {
		return errors.New("etcdtest: member already running")
	}
	argv := append([]string{m.bin}, m.args...)
	if m.net != nil {
		if err := m.net.addMember(m.idx); err != nil {
			return err
		}
		// A member killed leaves its unix socket behind: etcd would not
		// bind it again.
		if err := os.Remove(filepath.Join(m.cwd, m.Name+":2379")); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		// nsenter joins the member's namespace and execs etcd: the pid
		// is etcd's.
		argv = m.net.wrap(m.idx, argv)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = m.cwd
	cmd.Stdout, cmd.Stderr = nil, os.Stderr
	// If the test binary dies, so does etcd.
	cmd.SysProcAttr = proctest.ServerAttr(nil)
	if err := cmd.Start(); err != nil {
		return err
	}
	m.cmd, m.exit = cmd, make(chan struct{})
	go func(cmd *exec.Cmd, exit chan struct{}) { cmd.Wait(); close(exit) }(cmd, m.exit)
	return nil
}

// Running reports whether the member's process was started and not killed.
func (m *Member) Running() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cmd != nil
}

// PID is the member's process id, 0 when not running.
func (m *Member) PID() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd == nil {
		return 0
	}
	return m.cmd.Process.Pid
}

// Kill sends SIGKILL to the member's process and reaps it.
func (m *Member) Kill() {
	m.mu.Lock()
	cmd, exit := m.cmd, m.exit
	m.cmd = nil
	m.mu.Unlock()
	if cmd == nil || cmd.Process.Pid < 2 {
		return
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Process.Signal(syscall.SIGCONT)
	<-exit
}

// Signal sends sig (SIGSTOP, SIGCONT) to the member's process.
func (m *Member) Signal(sig syscall.Signal) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd != nil && m.cmd.Process.Pid >= 2 {
		m.cmd.Process.Signal(sig)
	}
}

// Close kills every member and removes the data.
func (c *Cluster) Close() {
	for _, m := range c.Members {
		m.Kill()
	}
	os.RemoveAll(c.root)
}
