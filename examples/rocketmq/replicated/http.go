package replicated

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/brokercore/brokercore/acl"
	"github.com/brokercore/brokercore/examples/cluster/replica"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/broker"
	"github.com/brokercore/brokercore/examples/rocketmq/server"
)

// The metrics and admin HTTP endpoint of a node (Config.MetricsAddr), as a
// single broker's (server.Config.MetricsAddr) with the same credentials:
//
//   - /metrics is the node's own: its replica, store, broker, listeners
//     and gRPC endpoint, plus rocketmq_replica_* (term, applied index,
//     whether it leads) and rocketmq_txn_relayed_checks_total (relay.go).
//     Scrape every node.
//   - GET /admin/offsets answers the replicated committed offsets, as this
//     node applied them (no epoch: epochs are every node's own).
//   - POST /admin/reset goes through raft on the leader, as
//     INVOKE_BROKER_TO_RESET_OFFSET does: it answers once raft committed
//     the new offsets of every queue asked (one entry: all or none), and
//     a reset raft refuses is answered 503 with Retry-After and the cause,
//     and moves nothing (one raft did not confirm, a timeout, may still be
//     applied by a later leader, as a send may). A follower checks the caller's credentials
//     itself, then forwards the reset to the leader as the remoting
//     resets are forwarded (forward.go: as INVOKE_BROKER_TO_RESET_OFFSET,
//     signed with the caller's credentials and marked by the cluster
//     secret, acl.go; a time goes to the millisecond) and answers the
//     leader's result; while it knows no leader it answers 503 with
//     Retry-After and the reason. (Served on a follower, a reset would
//     move that node's offset manager only.)

// errResetNotCommitted is a reset raft did not commit (503).
var errResetNotCommitted = errors.New("replicated: offset reset not committed")

// errNoLeader is a follower's answer to a reset while it knows no leader.
var errNoLeader = errors.New("replicated: no leader is known now")

// resetRetryAfter is the Retry-After of a reset answered 503: about an
// election.
const resetRetryAfter = "1"

func (s *Server) startHTTP(ln net.Listener) {
	auth := server.HTTPAuth{ACL: s.cfg.ACL, PublicMetrics: s.cfg.PublicMetrics, Log: s.log.With("listener", "http")}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), nodeCollector{s})
	mux := http.NewServeMux()
	mux.Handle("/metrics", auth.Metrics(promhttp.HandlerFor(reg, promhttp.HandlerOpts{})))
	mux.HandleFunc("/admin/reset", auth.Admin(acl.Update, s.handleReset))
	mux.HandleFunc("/admin/offsets", auth.Admin(acl.Get, s.handleOffsets))
	s.http = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := s.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("listener stopped", "addr", ln.Addr().String(), "err", err)
		}
	}()
}

// HTTPAddr is the metrics and admin endpoint's address ("" when not served).
func (s *Server) HTTPAddr() string { return s.httpAddr }

type resetQueue struct {
	Queue  int   `json:"queue"`
	Offset int64 `json:"offset"`
}

// handleReset resets the offsets through raft on the leader, and
// forwards the reset to it on a follower (see above).
func (s *Server) handleReset(w http.ResponseWriter, r *http.Request) {
	rr, herr := server.ParseReset(r, s.topics.Queues)
	if herr == nil && s.node.IsLeader() {
		var out []resetQueue
		if out, herr = s.resetHere(rr); herr == nil {
			writeResetAnswer(w, rr, out)
			return
		}
	} else if herr == nil {
		herr = s.forwardReset(w, r, rr)
	}
	if herr != nil {
		if herr.Status == http.StatusServiceUnavailable {
			w.Header().Set("Retry-After", resetRetryAfter)
		}
		herr.Write(w)
	}
}

// resetHere is a reset on the leader, as INVOKE_BROKER_TO_RESET_OFFSET
// (broker.ResetOffsets): through raft (writer.ResetOffsets, every queue in
// one entry), then the node's own offset manager (its connections' epochs).
func (s *Server) resetHere(rr server.ResetRequest) ([]resetQueue, *server.HTTPError) {
	targets, err := s.broker.ResetOffsets(rr.Group, rr.Topic, rr.Queues, rr.Offset, rr.Time)
	if err != nil {
		s.log.Warn("offset reset not committed", "group", rr.Group, "topic", rr.Topic, "queues", len(rr.Queues), "err", err)
		switch {
		case errors.Is(err, replica.ErrNotCommitted):
			return nil, &server.HTTPError{Status: http.StatusServiceUnavailable, Msg: fmt.Sprintf("%v: %v; a later leader may still apply it, check /admin/offsets or try again", errResetNotCommitted, err)}
		case errors.Is(err, broker.ErrNotWritable):
			return nil, &server.HTTPError{Status: http.StatusServiceUnavailable, Msg: fmt.Sprintf("%v: %v; nothing moved, try again", errResetNotCommitted, err)}
		case errors.Is(err, broker.ErrResetNotRecorded):
			return nil, &server.HTTPError{Status: http.StatusBadRequest, Msg: err.Error()}
		}
		return nil, &server.HTTPError{Status: http.StatusInternalServerError, Msg: fmt.Sprintf("committed through raft, the node's own offset: %v", err)}
	}
	out := make([]resetQueue, 0, len(rr.Queues))
	for _, q := range rr.Queues {
		s.log.Info("offset reset", "group", rr.Group, "topic", rr.Topic, "queue", q, "offset", targets[q])
		out = append(out, resetQueue{Queue: q, Offset: targets[q]})
	}
	return out, nil
}

func writeResetAnswer(w http.ResponseWriter, rr server.ResetRequest, out []resetQueue) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"group": rr.Group, "topic": rr.Topic, "queues": out})
}

// handleOffsets shows the group's replicated committed offsets of a topic:
// GET /admin/offsets?group=G&topic=T.
func (s *Server) handleOffsets(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	group, topic := q.Get("group"), q.Get("topic")
	n, ok := s.topics.Queues(topic)
	if group == "" || !ok {
		(&server.HTTPError{Status: http.StatusBadRequest, Msg: "group and an existing topic are required"}).Write(w)
		return
	}
	type row struct {
		Queue     int    `json:"queue"`
		Committed *int64 `json:"committed,omitempty"`
		Max       int64  `json:"max"`
	}
	rows := make([]row, 0, n)
	for i := range n {
		r := row{Queue: i, Max: s.node.Store().MaxOffset(topic, i)}
		if off, ok := s.node.Committed(group, topic, i); ok {
			r.Committed = &off
		}
		rows = append(rows, r)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(rows)
}

// nodeCollector exports the node's Stats at scrape time (unchecked: the
// metric set follows the Stats structs).
type nodeCollector struct{ s *Server }

func (nodeCollector) Describe(chan<- *prometheus.Desc) {}

func (c nodeCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	st := s.node.Status()
	gauge := func(name, help string, v float64) {
		ch <- prometheus.MustNewConstMetric(prometheus.NewDesc(name, help, nil, nil), prometheus.GaugeValue, v)
	}
	leads := 0.0
	if s.node.IsLeader() {
		leads = 1
	}
	gauge("rocketmq_replica_leader", "1 while this node leads.", leads)
	gauge("rocketmq_replica_term", "The node's raft term.", float64(st.Term))
	gauge("rocketmq_replica_applied_index", "The raft index the node applied.", float64(st.AppliedIndex))
	gauge("rocketmq_replica_commit_index", "The raft commit index the node knows.", float64(st.CommitIndex))
	server.EmitStats(ch, "rocketmq_store", s.node.Store().Stats())
	server.EmitStats(ch, "rocketmq_offset", s.core.offsets.Stats())
	server.EmitStats(ch, "rocketmq_lock", s.core.locks.Stats())
	server.EmitStats(ch, "rocketmq_consumer", s.core.consumers.Stats())
	server.EmitStats(ch, "rocketmq_broker", s.broker.Stats())
	server.EmitStats(ch, "rocketmq_remoting_namesrv", s.nsrv.Stats())
	server.EmitStats(ch, "rocketmq_remoting_broker", s.bsrv.Stats())
	if s.cfg.ACL != nil {
		server.EmitStats(ch, "rocketmq_acl", s.cfg.ACL.Stats())
	}
	if tm, err := s.node.Transactions(); err == nil {
		server.EmitStats(ch, "rocketmq_txn", tm.Stats())
	}
	ch <- prometheus.MustNewConstMetric(prometheus.NewDesc("rocketmq_txn_relayed_checks_total",
		"Transaction checks this node, leading, had a follower push to its producers.", nil, nil),
		prometheus.CounterValue, float64(s.relay.relayed.Load()))
	if s.grpc != nil {
		s.grpc.Collect(ch)
	}
}
