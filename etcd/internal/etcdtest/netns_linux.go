package etcdtest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
)

// Net is a small network of namespaces that a test makes for itself, so
// that a host or a member can be cut off while nothing leaves the
// namespaces it made: a core namespace with a bridge, and one namespace
// per host and per member of a cluster started with Options.Net, each on
// a veth pair to the bridge with an address of its own. Cut takes the
// bridge's end of a host's or member's veth down: its packets are dropped
// on the wire, its connections hang as in a real partition (no reset, no
// error), and Heal brings it back.
//
// Each namespace is held by a sleep(1) child in it, made with
// CLONE_NEWNET and killed when the test process dies (Pdeathsig), so the
// namespaces and their links vanish with the test's processes even when
// the test does not end cleanly; Close kills the holders. The test
// process itself stays where it was: it reaches the members on unix
// sockets (Member.ControlURL), which do not depend on the namespace.
// Running commands in a namespace takes nsenter(1); configuring it, ip(8).
type Net struct {
	ip      string
	nsenter string
	core    *exec.Cmd
	mu      sync.Mutex
	hosts   map[string]*exec.Cmd // host or member name -> the holder of its namespace
	links   map[string]string    // host or member name -> its veth's bridge end, in core
	cut     map[string]bool
}

// The network's addresses: members at 10.87.0.1…, hosts at 10.87.0.101….
const (
	netPrefix = "10.87.0."
	netBits   = "/24"
)

// ErrNoNetns is wrapped by NewNet's error when this machine does not let
// the test make network namespaces (not root, no nsenter or ip, a
// sandbox that forbids CLONE_NEWNET): a test skips its partitions then.
var ErrNoNetns = errors.New("network namespaces not available")

// NewNet makes the core namespace and one namespace per host.
func NewNet(hosts []string) (*Net, error) {
	n := &Net{hosts: map[string]*exec.Cmd{}, links: map[string]string{}, cut: map[string]bool{}}
	var err error
	if n.ip, err = lookPath("ip", "/usr/sbin/ip", "/sbin/ip"); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoNetns, err)
	}
	if n.nsenter, err = lookPath("nsenter", "/usr/bin/nsenter"); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoNetns, err)
	}
	if n.core, err = holder(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoNetns, err)
	}
	fail := func(err error) (*Net, error) {
		n.Close()
		return nil, fmt.Errorf("%w: %v", ErrNoNetns, err)
	}
	if err := n.run(n.core, "link", "set", "lo", "up"); err != nil {
		return fail(err)
	}
	if err := n.run(n.core, "link", "add", "br0", "type", "bridge"); err != nil {
		return fail(err)
	}
	if err := n.run(n.core, "link", "set", "br0", "up"); err != nil {
		return fail(err)
	}
	for i, h := range hosts {
		if err := n.join(h, fmt.Sprintf("vh%d", i), fmt.Sprintf("%s%d", netPrefix, 101+i)); err != nil {
			return fail(err)
		}
	}
	return n, nil
}

// join makes a namespace for name on a veth pair whose bridge end is
// link, with addr on its own end.
func (n *Net) join(name, link, addr string) error {
	p, err := holder()
	if err != nil {
		return err
	}
	n.hosts[name] = p
	n.links[name] = link
	pid := fmt.Sprint(p.Process.Pid)
	steps := []struct {
		in   *exec.Cmd
		args []string
	}{
		{n.core, []string{"link", "add", link, "type", "veth", "peer", "name", "eth0", "netns", pid}},
		{n.core, []string{"link", "set", link, "master", "br0"}},
		{n.core, []string{"link", "set", link, "up"}},
		{p, []string{"link", "set", "lo", "up"}},
		{p, []string{"addr", "add", addr + netBits, "dev", "eth0"}},
		{p, []string{"link", "set", "eth0", "up"}},
	}
	for _, s := range steps {
		if err := n.run(s.in, s.args...); err != nil {
			return err
		}
	}
	return nil
}

func lookPath(name string, alt ...string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, p := range alt {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found", name)
}

// holder starts a process in a new network namespace, to hold it.
func holder() (*exec.Cmd, error) {
	cmd := exec.Command("sleep", "infinity")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET, Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return cmd, nil
}

func nsPath(p *exec.Cmd) string { return fmt.Sprintf("/proc/%d/ns/net", p.Process.Pid) }

// run runs ip(8) with args in the namespace of p.
func (n *Net) run(p *exec.Cmd, args ...string) error {
	out, err := exec.Command(n.nsenter, append([]string{"--net=" + nsPath(p), "--", n.ip}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Command is exec.Command for a process in host's namespace: nsenter(1)
// joins it and execs name, so the process started is name itself (the
// same pid), with nsenter's name until that exec.
func (n *Net) Command(host, name string, args ...string) *exec.Cmd {
	n.mu.Lock()
	p := n.hosts[host]
	n.mu.Unlock()
	if p == nil {
		panic("etcdtest: no host " + host + " in the network")
	}
	return exec.Command(n.nsenter, append([]string{"--net=" + nsPath(p), "--", name}, args...)...)
}

// wrap returns the argv that runs argv in member i's namespace.
func (n *Net) wrap(i int, argv []string) []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string{n.nsenter, "--net=" + nsPath(n.hosts[MemberName(i)]), "--"}, argv...)
}

// memberIP is the address of member i (its namespace is made when it
// first starts).
func memberIP(i int) string { return fmt.Sprintf("%s%d", netPrefix, 1+i) }

// MemberName is the name of member i, for Cut and Heal.
func MemberName(i int) string { return fmt.Sprintf("m%d", i) }

// addMember makes member i's namespace, once.
func (n *Net) addMember(i int) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.hosts[MemberName(i)] != nil {
		return nil
	}
	return n.join(MemberName(i), fmt.Sprintf("vm%d", i), memberIP(i))
}

// Cut cuts a host or a member (MemberName) off: every packet between it
// and the bridge is dropped until Heal.
func (n *Net) Cut(host string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.run(n.core, "link", "set", n.links[host], "down"); err != nil {
		return err
	}
	n.cut[host] = true
	return nil
}

// Heal undoes Cut.
func (n *Net) Heal(host string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.run(n.core, "link", "set", n.links[host], "up"); err != nil {
		return err
	}
	delete(n.cut, host)
	return nil
}

// Close kills the processes that hold the namespaces. A namespace (and
// its links) goes away once no process is left in it: the caller ends
// the members and the hosts' processes it started.
func (n *Net) Close() {
	for _, p := range append([]*exec.Cmd{n.core}, mapValues(n.hosts)...) {
		if p != nil && p.Process != nil && p.Process.Pid > 1 {
			p.Process.Kill()
			p.Wait()
		}
	}
}

func mapValues(m map[string]*exec.Cmd) []*exec.Cmd {
	var out []*exec.Cmd
	for _, v := range m {
		out = append(out, v)
	}
	return out
}
