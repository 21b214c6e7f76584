// Command cluster runs brokercore brokers replicated with hashicorp/raft.
//
//	go run . -bootstrap                      # three nodes on loopback, one process
//	go run . -id n1 -raft-addr 127.0.0.1:7001 -http-addr 127.0.0.1:8001 -data d1
//	go run . -id n2 -raft-addr 127.0.0.1:7002 -http-addr 127.0.0.1:8002 -data d2 -join 127.0.0.1:8001
//	go run . -cluster-secret-file F -post 127.0.0.1:8001/members/remove -body '{"id":"n2"}'
//
// A node without -join and without raft state bootstraps a one-voter
// cluster; -join asks that node (or any member: followers redirect) to add
// this one as a voter. With -cluster-secret-file, membership changes,
// offset resets and timer cancels must prove the secret (httpauth.go);
// -post sends one such request. See README.md for the HTTP API.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/brokercore/brokercore/examples/cluster/replica"
	"github.com/hashicorp/raft"
)

func main() { os.Exit(run(os.Args[1:])) }

func run(args []string) int {
	fs := flag.NewFlagSet("cluster", flag.ContinueOnError)
	bootstrap := fs.Bool("bootstrap", false, "run a 3-node cluster on loopback in this process")
	id := fs.String("id", "", "node id (stable across restarts)")
	raftAddr := fs.String("raft-addr", "", "raft TCP address, e.g. 127.0.0.1:7001")
	httpAddr := fs.String("http-addr", "", "HTTP API address, e.g. 127.0.0.1:8001")
	join := fs.String("join", "", "HTTP address of a member to join through")
	data := fs.String("data", "cluster-data", "data directory (with -bootstrap: the parent of n1, n2, n3)")
	cluster := fs.String("cluster", "", "expected cluster id (refuse another cluster's data directory)")
	verbose := fs.Bool("v", false, "debug logging")
	timeout := fs.Duration("heartbeat", replica.DefaultHeartbeatTimeout, "raft heartbeat and election timeout (failover takes a little over this)")
	groups := fs.Int("groups", 1, "raft groups the queues are sharded over (queue q in group q mod N); a data directory keeps its number")
	logStore := fs.String("log-store", "", `raft log: "segment" (one fsync per batch) or "bolt"; default: the data directory's, "segment" for a new one`)
	secretFile := fs.String("cluster-secret-file", "", "file holding the cluster's shared secret (at least 16 bytes, the same on every member): raft connections must prove it")
	insecureRaft := fs.Bool("insecure-raft", false, "allow a non-loopback -raft-addr without -cluster-secret-file (anyone who reaches it can append raft entries)")
	insecureHTTP := fs.Bool("insecure-http", false, "allow a non-loopback -http-addr: its data endpoints answer anyone who reaches it (and without -cluster-secret-file, so do membership changes and offset resets)")
	postTo := fs.String("post", "", "instead of running a node: POST -body to this URL (host:port/path), signed with -cluster-secret-file, and print the answer")
	postBody := fs.String("body", "{}", "the JSON body of -post")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var secret []byte
	if *secretFile != "" {
		var err error
		if secret, err = replica.LoadSecret(*secretFile); err != nil {
			fmt.Fprintln(os.Stderr, "bad -cluster-secret-file:", err)
			return 2
		}
	}
	if *postTo != "" {
		return postCommand(*postTo, []byte(*postBody), httpKey(secret), os.Stdout, os.Stderr)
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	if *bootstrap {
		err = runLocalGroups(ctx, *data, *groups, secret, log, os.Stderr)
	} else {
		err = runNode(ctx, *groups, replica.Config{ID: *id, Dir: *data, RaftAddr: *raftAddr, Addr: *httpAddr, ClusterID: *cluster, Logger: log,
			HeartbeatTimeout: *timeout, ElectionTimeout: *timeout, LogStore: *logStore,
			ClusterSecret: secret, InsecureRaft: *insecureRaft}, *join, *insecureHTTP)
	}
	if err != nil {
		log.Error("cluster: exit", "err", err)
		return 1
	}
	return 0
}

// server is a node (its raft groups) with its HTTP API.
type server struct {
	gs   *replica.Groups
	http *http.Server
	done chan error
}

// serve opens a member's raft groups and serves their HTTP API on
// cfg.Addr, which must be loopback unless insecureHTTP (checkHTTPAddr).
func serve(cfg replica.Config, groups int, insecureHTTP bool) (*server, error) {
	if cfg.Addr == "" {
		return nil, fmt.Errorf("-http-addr is required: %w", replica.ErrInvalid)
	}
	if err := checkHTTPAddr(cfg.Addr, cfg.ClusterSecret, insecureHTTP); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, err
	}
	var gs *replica.Groups
	if cfg.Probe == nil {
		cfg.Probe = func(id, _, addr string) error { return httpProbe(gs.Group(0), id, addr) }
	}
	gs, err = replica.OpenGroups(cfg, groups)
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	s := &server{gs: gs, http: &http.Server{Handler: GroupsHandler(gs, cfg), ReadHeaderTimeout: 5 * time.Second}, done: make(chan error, 1)}
	go func() { s.done <- s.http.Serve(ln) }()
	return s, nil
}

func (s *server) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.http.Shutdown(ctx)
	if serr := <-s.done; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return errors.Join(err, s.gs.Close())
}

func runNode(ctx context.Context, groups int, cfg replica.Config, join string, insecureHTTP bool) error {
	if cfg.ID == "" || cfg.RaftAddr == "" {
		return fmt.Errorf("-id, -raft-addr and -http-addr are required (or -bootstrap): %w", replica.ErrInvalid)
	}
	fresh, err := isFresh(cfg.Dir)
	if err != nil {
		return err
	}
	if join == "" {
		cfg.Bootstrap = []raft.Server{{ID: raft.ServerID(cfg.ID), Address: raft.ServerAddress(cfg.RaftAddr)}}
	}
	s, err := serve(cfg, groups, insecureHTTP)
	if err != nil {
		return err
	}
	if join != "" && fresh {
		for g := range groups { // a member of every raft group
			if err := joinCluster(ctx, join, memberReq{ID: cfg.ID, RaftAddr: cfg.RaftAddr, HTTPAddr: cfg.Addr, RaftGroup: g}, httpKey(cfg.ClusterSecret)); err != nil {
				_ = s.close()
				return fmt.Errorf("raft group %d: %w", g, err)
			}
		}
	}
	cfg.Logger.Info("cluster: node up", "node", cfg.ID, "raft_addr", cfg.RaftAddr, "http_addr", cfg.Addr)
	<-ctx.Done()
	return s.close()
}

// isFresh reports whether dir holds no raft state yet (of one group, or
// of several: dir/groups.json).
func isFresh(dir string) (bool, error) {
	has, err := replica.HasState(dir)
	if has || err != nil {
		return !has, err
	}
	_, err = os.Stat(filepath.Join(dir, "groups.json"))
	if errors.Is(err, os.ErrNotExist) {
		return true, nil
	}
	return false, err
}

// httpProbe is the replica's Probe: the node to add must answer /status
// as the node it is added as, and belong to no other cluster.
func httpProbe(n *replica.Node, id, httpAddr string) error {
	if httpAddr == "" {
		return fmt.Errorf("no http address to probe")
	}
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + httpAddr + "/status")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var s replica.Status
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		return fmt.Errorf("status: %v", err)
	}
	if s.ID != id {
		return fmt.Errorf("%s answers as node %q", httpAddr, s.ID)
	}
	if s.Cluster != "" && s.Cluster != n.Status().Cluster {
		return fmt.Errorf("%s belongs to cluster %q", httpAddr, s.Cluster)
	}
	return nil
}

// joinCluster asks a member to add this node, following redirects to the
// leader and retrying while the cluster elects one; with a key (the
// cluster secret's, httpKey) every attempt and hop is signed.
func joinCluster(ctx context.Context, addr string, req memberReq, key []byte) error {
	body, _ := json.Marshal(req)
	var last error
	for i := 0; i < 60; i++ {
		code, answer, err := postSigned(ctx, "http://"+addr+"/members", body, key)
		if err == nil {
			if code == http.StatusOK {
				return nil
			}
			var e struct {
				Error string `json:"error"`
			}
			_ = json.Unmarshal(answer, &e)
			last = fmt.Errorf("join through %s: %d %s: %s", addr, code, http.StatusText(code), e.Error)
			if code != http.StatusServiceUnavailable {
				return last
			}
		} else {
			last = err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	return last
}

// postSigned posts a JSON body to url and answers the status and body of
// the response. With a key, the request carries a proof of the cluster
// secret (httpauth.go), and so does every redirect it follows, each with a
// fresh one (a node refuses a proof it accepted before).
func postSigned(ctx context.Context, url string, body, key []byte) (int, []byte, error) {
	c := http.Client{Timeout: 10 * time.Second, CheckRedirect: func(next *http.Request, via []*http.Request) error {
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		if key != nil {
			sign(next, key, body, time.Now())
		}
		return nil
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if key != nil {
		sign(req, key, body, time.Now())
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxRequestBody))
	return resp.StatusCode, answer, err
}

// postCommand is -post: one signed request (to("host:port/path")), its
// answer printed to out; 0 when the answer is a 2xx.
func postCommand(to string, body, key []byte, out, errOut io.Writer) int {
	code, answer, err := postSigned(context.Background(), "http://"+to, body, key)
	if err != nil {
		fmt.Fprintln(errOut, "post:", err)
		return 1
	}
	_, _ = out.Write(answer)
	if code/100 != 2 {
		fmt.Fprintf(errOut, "post: %d %s\n", code, http.StatusText(code))
		return 1
	}
	return 0
}

// The -bootstrap cluster's addresses when they are free: raft on
// 127.0.0.1:7001-7003, HTTP on 127.0.0.1:8001-8003.
const (
	localRaftPort = 7001
	localHTTPPort = 8001
)

// localAddrs returns the raft and HTTP addresses of -bootstrap's three
// nodes: the default ports when all six are free, else six free ports the
// system picked (the program prints whichever it uses).
func localAddrs() (raftAddrs, httpAddrs []string, err error) {
	for i := range 3 {
		raftAddrs = append(raftAddrs, fmt.Sprintf("127.0.0.1:%d", localRaftPort+i))
		httpAddrs = append(httpAddrs, fmt.Sprintf("127.0.0.1:%d", localHTTPPort+i))
	}
	all := append(slices.Clone(raftAddrs), httpAddrs...)
	if free(all) {
		return raftAddrs, httpAddrs, nil
	}
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			_ = ln.Close()
		}
	}()
	picked := make([]string, len(all))
	for i := range picked {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, nil, err
		}
		lns = append(lns, ln) // held until all six are picked, so they differ
		picked[i] = ln.Addr().String()
	}
	return picked[:3], picked[3:], nil
}

// free reports whether every address can be listened on now.
func free(addrs []string) bool {
	for _, a := range addrs {
		ln, err := net.Listen("tcp", a)
		if err != nil {
			return false
		}
		_ = ln.Close()
	}
	return true
}

// runLocal runs three nodes of one raft group on loopback in this process
// and prints their addresses to out.
func runLocal(ctx context.Context, data string, log *slog.Logger, out io.Writer) error {
	return runLocalGroups(ctx, data, 1, nil, log, out)
}

// runLocalGroups is runLocal with the queues sharded over groups raft
// groups (and the raft ports authenticated with secret, when set).
func runLocalGroups(ctx context.Context, data string, groups int, secret []byte, log *slog.Logger, out io.Writer) error {
	raftAddrs, httpAddrs, err := localAddrs()
	if err != nil {
		return err
	}
	var servers []raft.Server
	cfgs := make([]replica.Config, 3)
	for i := range cfgs {
		id := fmt.Sprintf("n%d", i+1)
		cfgs[i] = replica.Config{ID: id, Dir: filepath.Join(data, id), RaftAddr: raftAddrs[i], Addr: httpAddrs[i], Logger: log,
			ClusterSecret: secret}
		servers = append(servers, raft.Server{ID: raft.ServerID(id), Address: raft.ServerAddress(cfgs[i].RaftAddr)})
	}
	var up []*server
	closeAll := func() error {
		var errs []error
		for _, s := range up {
			errs = append(errs, s.close())
		}
		return errors.Join(errs...)
	}
	bootAddrs := map[string]string{}
	for _, cfg := range cfgs {
		bootAddrs[cfg.ID] = cfg.Addr
	}
	for _, cfg := range cfgs {
		cfg.Bootstrap, cfg.BootstrapAddrs = servers, bootAddrs
		s, err := serve(cfg, groups, false)
		if err != nil {
			return errors.Join(err, closeAll())
		}
		up = append(up, s)
	}
	fmt.Fprintf(out, `3 nodes up, %d raft group(s): HTTP on %s, %s, %s (data in %s). Try:
  curl -sL %s/produce -d '{"topic":"t","queue":0,"messages":[{"body":"hello"}]}'
  curl -sL %s/pop -d '{"group":"g","topic":"t","queue":0,"max":8}'
  curl -s %s/status
Ctrl-C stops them.
`, groups, httpAddrs[0], httpAddrs[1], httpAddrs[2], data, httpAddrs[1], httpAddrs[0], httpAddrs[2])
	<-ctx.Done()
	return closeAll()
}
