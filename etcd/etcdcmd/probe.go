package etcdcmd

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// The client library reports every failure at the door as "context
// deadline exceeded", after the whole dial timeout: a port where nothing
// listens, a wrong CA, http:// to a TLS port. So while the first round
// trip runs, each endpoint is also probed directly (a TCP connection, then
// a TLS handshake or a plain HTTP request), and a probe that fails for
// certain (refused, no route, a certificate problem, the wrong scheme)
// says so at once, naming the endpoint. When every endpoint fails so,
// leaderrun-etcd exits 69 without waiting for the dial timeout; a probe
// that cannot tell (a timeout, a proxy) decides nothing.

// doorError is a certain failure of one endpoint.
type doorError struct {
	endpoint string
	why      string
}

func (e *doorError) Error() string { return e.endpoint + ": " + e.why }

// probe checks one endpoint. It returns nil when the endpoint answers or
// the probe cannot tell, and a *doorError when it fails for certain.
func probe(ctx context.Context, endpoint string, tc *tls.Config) error {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return nil // the client library says what it makes of it
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), "2379")
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", host)
	if err != nil {
		return dialFailure(endpoint, host, u.Hostname(), err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	if u.Scheme == "https" || tc != nil {
		return probeTLS(ctx, endpoint, u, conn, tc)
	}
	return probePlain(ctx, endpoint, u, host, conn)
}

// dialFailure is the door error of a failed dial, or nil when it is not
// certain.
func dialFailure(endpoint, host, hostname string, err error) error {
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return &doorError{endpoint, fmt.Sprintf("connection refused: nothing listens on %s", host)}
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return &doorError{endpoint, fmt.Sprintf("no route to %s", host)}
	}
	var dns *net.DNSError
	if errors.As(err, &dns) && dns.IsNotFound {
		return &doorError{endpoint, fmt.Sprintf("no such host %s", hostname)}
	}
	return nil
}

// probeTLS shakes hands over conn and asks for /version, which a server
// that requires a client certificate refuses only after the handshake
// (TLS 1.3).
func probeTLS(ctx context.Context, endpoint string, u *url.URL, conn net.Conn, tc *tls.Config) error {
	c := tc.Clone()
	if c == nil {
		c = &tls.Config{}
	}
	if c.ServerName == "" {
		c.ServerName = u.Hostname()
	}
	tconn := tls.Client(conn, c)
	if err := tconn.HandshakeContext(ctx); err != nil {
		return tlsFailure(endpoint, err)
	}
	fmt.Fprintf(tconn, "GET /version HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", u.Host)
	if _, err := bufio.NewReader(tconn).ReadString('\n'); err != nil {
		if f := tlsFailure(endpoint, err); f != nil {
			return f
		}
	}
	return nil
}

// probePlain asks for /version in plain HTTP, which etcd serves on its
// client port. A TLS port answers a plain request with a 400 saying so,
// or not at all: then a TLS handshake tells.
func probePlain(ctx context.Context, endpoint string, u *url.URL, host string, conn net.Conn) error {
	speaksTLSErr := &doorError{endpoint, "the server speaks TLS: give https://" + u.Host + " and --cacert FILE (and --cert, --key if it asks for a client certificate)"}
	conn.SetReadDeadline(time.Now().Add(plainWait))
	fmt.Fprintf(conn, "GET /version HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", u.Host)
	r := bufio.NewReader(conn)
	status, err := r.ReadString('\n')
	if err != nil && speaksTLS(ctx, host) { // no answer, or the connection closed on us
		return speaksTLSErr
	}
	if err != nil {
		return nil
	}
	if strings.Contains(status, " 400 ") {
		body := make([]byte, 512)
		n, _ := r.Read(body)
		if strings.Contains(string(body[:n]), "HTTPS") {
			return speaksTLSErr
		}
	}
	if len(status) > 0 && status[0] == 0x15 { // a TLS alert record
		return &doorError{endpoint, "the server speaks TLS: give https://" + u.Host + " and --cacert FILE"}
	}
	return nil
}

// plainWait is how long a plain endpoint may take to answer /version
// before it is asked whether it speaks TLS (as it is when it closes the
// connection without a word).
const plainWait = 500 * time.Millisecond

// speaksTLS reports whether host answers a TLS handshake.
func speaksTLS(ctx context.Context, host string) bool {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", host)
	if err != nil {
		return false
	}
	defer conn.Close()
	err = tls.Client(conn, &tls.Config{InsecureSkipVerify: true}).HandshakeContext(ctx)
	var alert tls.AlertError
	return err == nil || errors.As(err, &alert) || strings.Contains(fmt.Sprint(err), "remote error: tls:")
}

// tlsFailure names what went wrong in a TLS handshake, nil when it cannot
// tell.
func tlsFailure(endpoint string, err error) error {
	var ua x509.UnknownAuthorityError
	var hn x509.HostnameError
	var ci x509.CertificateInvalidError
	var rec tls.RecordHeaderError
	var alert tls.AlertError
	switch {
	case errors.As(err, &ua):
		return &doorError{endpoint, fmt.Sprintf("the server's certificate is not signed by a CA of --cacert (%v)", err)}
	case errors.As(err, &hn):
		return &doorError{endpoint, fmt.Sprintf("the server's certificate is not for this host (%v)", err)}
	case errors.As(err, &ci):
		return &doorError{endpoint, fmt.Sprintf("the server's certificate is not valid (%v)", err)}
	case errors.As(err, &rec):
		return &doorError{endpoint, "the server does not speak TLS: give http:// for it, or the port that serves TLS"}
	case errors.As(err, &alert), strings.Contains(err.Error(), "remote error: tls:"):
		return &doorError{endpoint, fmt.Sprintf("the server refused the TLS handshake (%v); give --cert and --key of a certificate its CA signed", err)}
	}
	var x509Err *tls.CertificateVerificationError
	if errors.As(err, &x509Err) {
		return &doorError{endpoint, fmt.Sprintf("the server's certificate does not verify (%v)", err)}
	}
	return nil
}

// probeAll probes every endpoint at once and returns the joined failures
// when every one of them fails for certain, or nil as soon as one may be
// fine.
func probeAll(ctx context.Context, eps []string, tc *tls.Config) error {
	errs := make(chan error, len(eps))
	for _, e := range eps {
		go func() { errs <- probe(ctx, e, tc) }()
	}
	var failed []string
	for range eps {
		err := <-errs
		if err == nil {
			return nil
		}
		failed = append(failed, err.Error())
	}
	return errors.New(strings.Join(failed, "; "))
}

// probeTimeout bounds the probes: they answer within a round trip when
// they can tell at all.
const probeTimeout = 2 * time.Second
