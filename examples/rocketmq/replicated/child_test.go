package replicated

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/brokercore/brokercore/brokertest"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/broker"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
	"github.com/brokercore/brokercore/txn"
)

// childNode runs one node from RMQHA_CHILD (a JSON Config) until SIGTERM,
// printing "ready" once it serves.
func childNode() int {
	var cfg Config
	if err := json.Unmarshal([]byte(os.Getenv("RMQHA_CHILD")), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "child config:", err)
		return 2
	}
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if os.Getenv("RMQHA_TXN") == "fast" {
		// An open transaction is checked 1 s after it was stored, then
		// every second, never rolled back for the count (txn_v2_test.go).
		cfg.Txn = &txn.Options{TransactionTimeout: time.Second, CheckInterval: time.Second, CheckMax: 1 << 20, Tick: 50 * time.Millisecond}
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	s, err := Start(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "start:", err)
		return 1
	}
	fmt.Println("ready")
	<-term
	if err := s.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "close:", err)
		return 1
	}
	return 0
}

// nodeProc is one node process.
type nodeProc struct {
	cfg  Config
	cmd  *exec.Cmd
	done chan error
	dead bool // killed (or exited at start), until started again
	log  string
}

// freeAddr is an address for a server the test starts later (brokertest.FreeAddr:
// outside the ephemeral range, so no outgoing connection takes it first).
func freeAddr(t testing.TB) string { return brokertest.FreeAddr(t) }

// startProcs starts n node processes of a new cluster. Their addresses
// are picked free and listened on later: when another process took one in
// between, the whole cluster starts again on new ones.
func startProcs(t *testing.T, n int) []*nodeProc {
	t.Helper()
	for attempt := 1; ; attempt++ {
		ps, err := tryProcs(t, n)
		if err == nil {
			for _, p := range ps {
				t.Cleanup(func() {
					if t.Failed() {
						p.quit() // a hung node's goroutines go to its log
					}
					p.kill()
					if t.Failed() {
						b, _ := os.ReadFile(p.log)
						t.Logf("node %s log:\n%s", p.cfg.ID, b)
					}
				})
			}
			return ps
		}
		if !strings.Contains(err.Error(), "address already in use") || attempt == 5 {
			t.Fatal(err)
		}
		t.Logf("cluster start, attempt %d: %v; again on other ports", attempt, err)
	}
}

func tryProcs(t *testing.T, n int) ([]*nodeProc, error) {
	var ps []*nodeProc
	var peers []Peer
	for i := 0; i < n; i++ {
		cfg := Config{Dir: t.TempDir(), ID: fmt.Sprintf("n%d", i+1), RaftAddr: freeAddr(t),
			BrokerAddr: freeAddr(t), NameSrvAddr: freeAddr(t), GRPCAddr: freeAddr(t), GRPCLongPolling: 2 * time.Second, Bootstrap: true,
		}
		steadyRaft(&cfg)
		peers = append(peers, Peer{ID: cfg.ID, RaftAddr: cfg.RaftAddr, BrokerAddr: cfg.BrokerAddr, GRPCAddr: cfg.GRPCAddr})
		ps = append(ps, &nodeProc{cfg: cfg})
	}
	for i, p := range ps {
		p.cfg.Peers = peers
		p.log = p.cfg.Dir + "/node.log"
		if err := p.tryStart(); err != nil {
			for _, q := range ps[:i+1] {
				q.kill()
			}
			return nil, err
		}
	}
	return ps, nil
}

// start starts the node's process (again, after a kill: on its data) and
// waits until it serves.
func (p *nodeProc) start(t *testing.T) {
	t.Helper()
	if err := p.tryStart(); err != nil {
		t.Fatal(err)
	}
}

// tryStart is start, answering what went wrong (with the node's last
// log line when it exited).
func (p *nodeProc) tryStart() error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	js, err := json.Marshal(p.cfg)
	if err != nil {
		return err
	}
	logf, err := os.OpenFile(p.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	p.cmd = exec.Command(exe, "-test.run=^$")
	p.cmd.Env = append(os.Environ(), "RMQHA_CHILD="+string(js))
	p.cmd.Stderr = logf
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := p.cmd.Start(); err != nil {
		return err
	}
	p.dead = false
	p.done = make(chan error, 1)
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() && sc.Text() == "ready" {
			close(ready)
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	cmd, done := p.cmd, p.done
	go func() { done <- cmd.Wait() }()
	select {
	case <-ready:
		return nil
	case err := <-p.done:
		p.done <- err
		p.dead = true
		b, _ := os.ReadFile(p.log)
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		return fmt.Errorf("node %s exited: %v: %s", p.cfg.ID, err, lines[len(lines)-1])
	case <-time.After(30 * time.Second):
		p.kill()
		return fmt.Errorf("node %s not ready", p.cfg.ID)
	}
}

// kill sends SIGKILL and waits; idempotent.
func (p *nodeProc) kill() {
	if !p.dead {
		p.dead = true
		_ = p.cmd.Process.Kill()
		err := <-p.done
		p.done <- err
	}
}

// quit sends SIGQUIT, so the Go runtime writes every goroutine's stack to
// the node's log and exits, and waits up to 5 s for that.
func (p *nodeProc) quit() {
	if p.dead {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case err := <-p.done:
		p.done <- err
		p.dead = true
	case <-time.After(5 * time.Second):
	}
}

// call sends one request on a new connection and returns the answer.
func call(addr string, cmd *wire.Command) (*wire.Command, error) {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	cmd.Opaque = 1
	f, err := wire.Encode(cmd)
	if err != nil {
		return nil, err
	}
	if _, err := c.Write(f); err != nil {
		return nil, err
	}
	r := bufio.NewReader(c)
	for {
		frame, err := wire.ReadFrame(r, wire.DefaultMaxFrame)
		if err != nil {
			return nil, err
		}
		resp, err := wire.Decode(frame)
		if err != nil || resp.IsResponse() {
			return resp, err
		}
	}
}

// routeAddr asks a name server for a route and returns its broker address.
func routeAddr(ns string) (string, error) {
	resp, err := call(ns, &wire.Command{Code: wire.CodeGetRouteInfoByTopic, Language: "GO", Version: 317,
		ExtFields: map[string]string{"topic": "TBW102"}})
	if err != nil {
		return "", err
	}
	var rd struct {
		BrokerDatas []struct {
			BrokerName  string            `json:"brokerName"`
			BrokerAddrs map[string]string `json:"brokerAddrs"`
		} `json:"brokerDatas"`
	}
	if err := json.Unmarshal(resp.Body, &rd); err != nil {
		return "", fmt.Errorf("route %q: %v", resp.Body, err)
	}
	for _, bd := range rd.BrokerDatas {
		if bd.BrokerName == broker.DefaultBrokerName {
			return bd.BrokerAddrs["0"], nil
		}
	}
	return "", fmt.Errorf("route %q: no %s", resp.Body, broker.DefaultBrokerName)
}

// agreedLeader waits until the name servers of every live process route to
// the same broker, one of a live process, and returns that process.
func agreedLeader(t *testing.T, ps []*nodeProc, timeout time.Duration) *nodeProc {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		var addr string
		agree := true
		for _, p := range ps {
			if p.dead {
				continue
			}
			a, err := routeAddr(p.cfg.NameSrvAddr)
			if err != nil || (addr != "" && a != addr) {
				agree = false
				break
			}
			addr = a
		}
		if agree {
			for _, p := range ps {
				if !p.dead && p.cfg.BrokerAddr == addr && leads(p) {
					return p
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("the name servers agree on no live leader after %v", timeout)
	return nil
}

// leads reports whether the process's log says it leads.
func leads(p *nodeProc) bool {
	b, _ := os.ReadFile(p.log)
	i := strings.LastIndex(string(b), "cluster: leading")
	return i >= 0 && !strings.Contains(string(b[i:]), "leader services stopped")
}
