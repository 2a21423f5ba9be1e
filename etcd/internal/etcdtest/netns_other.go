//go:build !linux

package etcdtest

import (
	"errors"
	"os/exec"
	"strconv"
)

// Net is a network of namespaces (Linux only; see netns_linux.go).
type Net struct{}

// ErrNoNetns is NewNet's error where there are no network namespaces.
var ErrNoNetns = errors.New("network namespaces not available")

// NewNet fails with ErrNoNetns: network namespaces are Linux's.
func NewNet(hosts []string) (*Net, error) { return nil, ErrNoNetns }

// Command is exec.Command; there is no namespace to enter.
func (n *Net) Command(host, name string, args ...string) *exec.Cmd {
	return exec.Command(name, args...)
}

// Cut fails with ErrNoNetns.
func (n *Net) Cut(host string) error { return ErrNoNetns }

// Heal fails with ErrNoNetns.
func (n *Net) Heal(host string) error { return ErrNoNetns }

// Close does nothing.
func (n *Net) Close() {}

func (n *Net) wrap(i int, argv []string) []string { return argv }

// MemberName is the name of member i, for Cut and Heal.
func MemberName(i int) string { return "m" + strconv.Itoa(i) }

func memberIP(i int) string { return "127.0.0.1" }

func (n *Net) addMember(i int) error { return ErrNoNetns }
