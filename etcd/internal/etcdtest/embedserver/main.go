// Command embedserver is a current etcd server (go.etcd.io/etcd/server/v3,
// the version of the client in etcd/go.mod) for the tests, started from
// its embed package: it takes the flags of etcd that package etcdtest
// gives a member. The etcd binary module is not on the Go module proxy,
// and a go install of the server module is refused (its go.mod has
// replace directives), hence this main. Build it with
//
//	go build -o /tmp/etcd37 ./internal/etcdtest/embedserver (in etcd/)
//
// and run the tests with LEADERRUN_ETCD_BIN=/tmp/etcd37, or with
// LEADERRUN_ETCD_BIN=embed, which builds it (etcdtest.Bin).
package main

import (
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"go.etcd.io/etcd/server/v3/embed"
)

func main() {
	cfg := embed.NewConfig()
	var listenClient, advertiseClient, listenPeer, advertisePeer string
	var logger string
	fs := flag.NewFlagSet("embedserver", flag.ExitOnError)
	fs.StringVar(&cfg.Name, "name", "default", "member name")
	fs.StringVar(&cfg.Dir, "data-dir", "default.etcd", "data directory")
	fs.StringVar(&listenClient, "listen-client-urls", "http://127.0.0.1:2379", "client URLs to listen on")
	fs.StringVar(&advertiseClient, "advertise-client-urls", "http://127.0.0.1:2379", "client URLs to advertise")
	fs.StringVar(&listenPeer, "listen-peer-urls", "http://127.0.0.1:2380", "peer URLs to listen on")
	fs.StringVar(&advertisePeer, "initial-advertise-peer-urls", "http://127.0.0.1:2380", "peer URLs to advertise")
	fs.StringVar(&cfg.InitialCluster, "initial-cluster", "", "initial cluster")
	fs.StringVar(&cfg.ClusterState, "initial-cluster-state", "new", "new or existing")
	fs.StringVar(&cfg.InitialClusterToken, "initial-cluster-token", "etcd-cluster", "cluster token")
	fs.UintVar(&cfg.TickMs, "heartbeat-interval", 100, "heartbeat interval (ms)")
	fs.UintVar(&cfg.ElectionMs, "election-timeout", 1000, "election timeout (ms)")
	fs.StringVar(&logger, "logger", "zap", "logger (zap only)")
	fs.StringVar(&cfg.LogLevel, "log-level", "error", "log level")
	fs.StringVar(&cfg.ClientTLSInfo.CertFile, "cert-file", "", "client server TLS certificate")
	fs.StringVar(&cfg.ClientTLSInfo.KeyFile, "key-file", "", "client server TLS key")
	fs.StringVar(&cfg.ClientTLSInfo.TrustedCAFile, "trusted-ca-file", "", "client CA")
	fs.BoolVar(&cfg.ClientTLSInfo.ClientCertAuth, "client-cert-auth", false, "require client certificates")
	fs.Parse(os.Args[1:])
	if cfg.InitialCluster == "" {
		cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	}
	var err error
	for _, u := range []struct {
		s   string
		dst *[]url.URL
	}{{listenClient, &cfg.ListenClientUrls}, {advertiseClient, &cfg.AdvertiseClientUrls}, {listenPeer, &cfg.ListenPeerUrls}, {advertisePeer, &cfg.AdvertisePeerUrls}} {
		if *u.dst, err = urls(u.s); err != nil {
			fail(err)
		}
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		fail(err)
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	select {
	case err := <-e.Err():
		fail(err)
	case <-sigs:
		e.Close()
	}
}

func urls(s string) ([]url.URL, error) {
	var out []url.URL
	for _, p := range strings.Split(s, ",") {
		u, err := url.Parse(p)
		if err != nil {
			return nil, err
		}
		out = append(out, *u)
	}
	return out, nil
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "embedserver:", err)
	os.Exit(1)
}
