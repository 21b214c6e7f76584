package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/brokercore/brokercore"
	"github.com/brokercore/brokercore/examples/cluster/replica"
	"github.com/brokercore/brokercore/pop"
	"github.com/brokercore/brokercore/schedule"
	"github.com/brokercore/brokercore/store"
)

// The HTTP API of one node (JSON in and out). Writes and consumption need
// the leader of the queue's raft group: a node that does not lead it
// answers 307 Temporary Redirect to the same path on that leader's HTTP
// address (clients re-send the body), or 503 when no leader is known.
// /read and /status answer locally on any node.
//
//	POST /produce          {"topic","queue","messages":[{"body","tags","keys","properties"}],"delay_level"}
//	POST /pop              {"group","topic","queue","max","invisible_ms","poll_ms","filter"}
//	POST /ack              {"handle"}
//	POST /change-invisible {"handle","invisible_ms"}
//	POST /produce          {…,"deliver_at_ms"}  a timer (one message)
//	POST /cancel           {"uniq_key","queue"}  cancel a pending timer
//	POST /offsets/reset    {"group","topic","queue","offset"}
//	GET  /offsets?group=&topic=&queue=
//	POST /members          {"id","raft_addr","http_addr","raft_group"}   add a voter
//	POST /members/remove   {"id","raft_group"}
//	GET  /read?topic=&queue=&offset=&max=
//	GET  /status
//
// cfg gives this node's HTTP address (Addr), the clock (Now), the logger
// and the cluster secret (ClusterSecret): with a secret, /members,
// /members/remove, /offsets/reset and /cancel need its proof, made for
// this node's Addr (httpauth.go). The data path (/produce, /pop, /ack,
// /change-invisible, /read, /offsets, /status) stays open: the program
// serves it on loopback only unless -insecure-http.
func Handler(n *replica.Node, cfg replica.Config) http.Handler {
	gs, _ := replica.NewGroups(n) // one node: never an error
	return GroupsHandler(gs, cfg)
}

// GroupsHandler is the HTTP API over several raft groups: a request is
// served by the group of its queue (replica.GroupOf), a pop handle names
// its group, membership requests name theirs ("raft_group", default 0).
func GroupsHandler(gs *replica.Groups, cfg replica.Config) http.Handler {
	now, log := cfg.Now, cfg.Logger
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a := &api{gs: gs, addr: cfg.Addr, now: now, auth: newVerifier(cfg.ClusterSecret, cfg.Addr, now, log)}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /produce", a.leaderOnly(a.handleProduce))
	mux.HandleFunc("POST /pop", a.leaderOnly(a.handlePop))
	mux.HandleFunc("POST /ack", a.leaderOnly(a.handleAck))
	mux.HandleFunc("POST /change-invisible", a.leaderOnly(a.handleChangeInvisible))
	mux.HandleFunc("POST /cancel", a.auth.guard(a.leaderOnly(a.handleCancel))) // it changes state: not the data path
	mux.HandleFunc("POST /offsets/reset", a.auth.guard(a.leaderOnly(a.handleResetOffset)))
	mux.HandleFunc("GET /offsets", a.handleOffsets)
	mux.HandleFunc("POST /members", a.auth.guard(a.leaderOnly(a.handleAddMember)))
	mux.HandleFunc("POST /members/remove", a.auth.guard(a.leaderOnly(a.handleRemoveMember)))
	mux.HandleFunc("GET /read", a.handleRead)
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, a.status()) })
	return mux
}

// statusJSON is /status: the node's status in its first raft group and,
// with several groups, every group's.
type statusJSON struct {
	replica.Status
	Groups []replica.Status `json:"groups,omitempty"`
	// RaftRefused counts the raft connections refused for want of the
	// cluster secret (-cluster-secret-file).
	RaftRefused uint64 `json:"raft_refused"`
	// HTTPRefused counts the admin requests (membership, offset resets,
	// cancels) refused for want of a proof of the cluster secret
	// (httpauth.go).
	HTTPRefused uint64 `json:"http_refused"`
}

func (a *api) status() statusJSON {
	all := a.gs.Status()
	s := statusJSON{Status: all[0], RaftRefused: a.gs.RaftRefused(), HTTPRefused: a.auth.Refused()}
	if len(all) > 1 {
		s.Groups = all
	}
	return s
}

// api is the HTTP API of one node.
type api struct {
	gs   *replica.Groups
	addr string // this node's HTTP address (replica.Config.Addr)
	now  func() time.Time
	auth *verifier
}

// leaderOnly redirects to the leader before reading the request when there
// is one raft group; with several, each handler redirects to the leader of
// its request's group (lead) once it read which one that is.
func (a *api) leaderOnly(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if a.gs.N() > 1 || a.lead(w, r, 0) {
			h(w, r)
		}
	}
}

// lead reports whether this node leads raft group g; if not, it answers
// the redirect to g's leader (or 503 when none is known).
func (a *api) lead(w http.ResponseWriter, r *http.Request, g int) bool {
	if a.gs.IsLeader(g) {
		return true
	}
	id, addr := a.gs.Leader(g)
	err := &replica.NotLeaderError{Node: a.gs.Group(g).ID(), LeaderID: id, LeaderAddr: addr, Group: g}
	if addr != "" && addr != a.addr {
		w.Header().Set("Location", "http://"+addr+r.URL.RequestURI())
		body := map[string]any{"error": err.Error(), "leader": addr}
		if a.gs.N() > 1 {
			body["raft_group"] = g
		}
		writeJSON(w, http.StatusTemporaryRedirect, body)
		return false
	}
	if a.gs.N() > 1 {
		writeErr(w, fmt.Errorf("raft group %d: %w", g, err))
		return false
	}
	writeErr(w, err)
	return false
}

type msgJSON struct {
	Body        string            `json:"body"`
	Tags        string            `json:"tags,omitempty"`
	Keys        []string          `json:"keys,omitempty"`
	Properties  map[string]string `json:"properties,omitempty"`
	Topic       string            `json:"topic,omitempty"`
	Queue       int               `json:"queue"`
	QueueOffset int64             `json:"queue_offset"`
	LogOffset   int64             `json:"log_offset"`
	StoredAt    time.Time         `json:"stored_at"`
	Handle      string            `json:"handle,omitempty"`
	Attempts    int               `json:"attempts,omitempty"`
}

func toJSON(m *store.Message) msgJSON {
	return msgJSON{Body: string(m.Body), Tags: m.Tags, Keys: m.Keys, Properties: m.Properties, Topic: m.Topic,
		Queue: m.QueueID, QueueOffset: m.QueueOffset, LogOffset: m.LogOffset, StoredAt: m.StoredAt}
}

type produceReq struct {
	Topic      string    `json:"topic"`
	Queue      int       `json:"queue"`
	Messages   []msgJSON `json:"messages"`
	DelayLevel int       `json:"delay_level,omitempty"`
	DeliverAt  int64     `json:"deliver_at_ms,omitempty"` // Unix ms: a timer
}

func (a *api) handleProduce(w http.ResponseWriter, r *http.Request) {
	var req produceReq
	if !readJSON(w, r, &req) || !a.lead(w, r, a.gs.GroupOf(req.Queue)) {
		return
	}
	msgs := make([]*store.Message, 0, len(req.Messages))
	for _, m := range req.Messages {
		msgs = append(msgs, &store.Message{Topic: req.Topic, QueueID: req.Queue, Body: []byte(m.Body), Tags: m.Tags,
			Keys: m.Keys, Properties: m.Properties, BornAt: a.now()})
	}
	var out []*store.Message
	var err error
	switch {
	case (req.DelayLevel != 0 || req.DeliverAt != 0) && len(msgs) != 1:
		err = fmt.Errorf("a delayed produce carries exactly one message: %w", replica.ErrInvalid)
	case req.DelayLevel != 0 && req.DeliverAt != 0:
		err = fmt.Errorf("delay_level or deliver_at_ms, not both: %w", replica.ErrInvalid)
	case req.DeliverAt != 0:
		var m *store.Message
		if m, err = a.gs.ProduceAt(msgs[0], time.UnixMilli(req.DeliverAt)); err == nil {
			out = []*store.Message{m}
		}
	case req.DelayLevel != 0:
		var m *store.Message
		if m, err = a.gs.ProduceDelayed(msgs[0], req.DelayLevel); err == nil {
			out = []*store.Message{m}
		}
	default:
		out, err = a.gs.Produce(msgs...)
	}
	if err != nil {
		writeErr(w, err)
		return
	}
	res := struct {
		Messages []msgJSON `json:"messages"`
	}{}
	for _, m := range out {
		j := toJSON(m)
		j.Body, j.Properties, j.Keys, j.Tags = "", nil, nil, ""
		res.Messages = append(res.Messages, j)
	}
	writeJSON(w, http.StatusOK, res)
}

type popReq struct {
	Group       string `json:"group"`
	Topic       string `json:"topic"`
	Queue       *int   `json:"queue"` // absent = every queue
	Max         int    `json:"max"`
	InvisibleMS int64  `json:"invisible_ms"`
	PollMS      int64  `json:"poll_ms"`
	Filter      string `json:"filter"`
}

func (a *api) handlePop(w http.ResponseWriter, r *http.Request) {
	var req popReq
	if !readJSON(w, r, &req) {
		return
	}
	q := pop.AllQueues
	if req.Queue != nil {
		q = *req.Queue
		if !a.lead(w, r, a.gs.GroupOf(q)) {
			return
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), time.Duration(req.PollMS)*time.Millisecond+5*time.Second)
	defer cancel()
	res, err := a.gs.Pop(ctx, pop.Request{Group: req.Group, Topic: req.Topic, QueueID: q, Max: req.Max,
		Invisible: time.Duration(req.InvisibleMS) * time.Millisecond, Poll: time.Duration(req.PollMS) * time.Millisecond,
		Filter: req.Filter, ClientID: r.RemoteAddr})
	if err != nil {
		writeErr(w, err)
		return
	}
	out := struct {
		Messages []msgJSON `json:"messages"`
	}{Messages: []msgJSON{}}
	for _, d := range res.Messages {
		j := toJSON(d.Message)
		j.Handle, j.Attempts = d.Handle, d.Attempts
		out.Messages = append(out.Messages, j)
	}
	writeJSON(w, http.StatusOK, out)
}

type handleReq struct {
	Handle      string `json:"handle"`
	InvisibleMS int64  `json:"invisible_ms"`
}

func (a *api) handleAck(w http.ResponseWriter, r *http.Request) {
	var req handleReq
	if !readJSON(w, r, &req) || !a.leadHandle(w, r, req.Handle) {
		return
	}
	if err := a.gs.Ack(req.Handle); err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
}

func (a *api) handleChangeInvisible(w http.ResponseWriter, r *http.Request) {
	var req handleReq
	if !readJSON(w, r, &req) || !a.leadHandle(w, r, req.Handle) {
		return
	}
	h, err := a.gs.ChangeInvisible(req.Handle, time.Duration(req.InvisibleMS)*time.Millisecond)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"handle": h})
}

func (a *api) handleCancel(w http.ResponseWriter, r *http.Request) {
	var req struct {
		UniqKey string `json:"uniq_key"`
		Queue   int    `json:"queue"` // the timer's queue: its raft group
	}
	if !readJSON(w, r, &req) || !a.lead(w, r, a.gs.GroupOf(req.Queue)) {
		return
	}
	if err := a.gs.CancelTimer(req.Queue, req.UniqKey); err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
}

type memberReq struct {
	ID        string `json:"id"`
	RaftAddr  string `json:"raft_addr"`
	HTTPAddr  string `json:"http_addr"`
	RaftGroup int    `json:"raft_group,omitempty"` // with several raft groups: which one
}

// leadHandle is lead for the group a pop handle names (a handle naming
// none is answered by the call it is for).
func (a *api) leadHandle(w http.ResponseWriter, r *http.Request, handle string) bool {
	g, _, err := a.gs.HandleGroup(handle)
	return err != nil || a.lead(w, r, g)
}

// memberGroup checks the request's raft group and leads it.
func (a *api) memberGroup(w http.ResponseWriter, r *http.Request, req memberReq) bool {
	if req.RaftGroup < 0 || req.RaftGroup >= a.gs.N() {
		writeErr(w, fmt.Errorf("raft_group %d of %d: %w", req.RaftGroup, a.gs.N(), replica.ErrInvalid))
		return false
	}
	return a.lead(w, r, req.RaftGroup)
}

func (a *api) handleAddMember(w http.ResponseWriter, r *http.Request) {
	var req memberReq
	if !readJSON(w, r, &req) || !a.memberGroup(w, r, req) {
		return
	}
	if err := a.gs.AddMember(req.RaftGroup, req.ID, req.RaftAddr, req.HTTPAddr); err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, a.gs.Status()[req.RaftGroup])
}

func (a *api) handleRemoveMember(w http.ResponseWriter, r *http.Request) {
	var req memberReq
	if !readJSON(w, r, &req) || !a.memberGroup(w, r, req) {
		return
	}
	if err := a.gs.RemoveMember(req.RaftGroup, req.ID); err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, a.gs.Status()[req.RaftGroup])
}

func (a *api) handleRead(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	queue, err1 := strconv.Atoi(q.Get("queue"))
	offset, err2 := strconv.ParseInt(q.Get("offset"), 10, 64)
	maxN, err3 := strconv.Atoi(q.Get("max"))
	if err1 != nil || err2 != nil || err3 != nil {
		writeErr(w, fmt.Errorf("read: queue, offset and max must be integers: %w", replica.ErrInvalid))
		return
	}
	msgs, err := a.gs.Read(q.Get("topic"), queue, offset, maxN)
	if err != nil {
		writeErr(w, err)
		return
	}
	out := struct {
		Messages []msgJSON `json:"messages"`
	}{Messages: []msgJSON{}}
	for _, m := range msgs {
		out.Messages = append(out.Messages, toJSON(m))
	}
	writeJSON(w, http.StatusOK, out)
}

type offsetReq struct {
	Group  string `json:"group"`
	Topic  string `json:"topic"`
	Queue  int    `json:"queue"`
	Offset int64  `json:"offset"`
}

func (a *api) handleResetOffset(w http.ResponseWriter, r *http.Request) {
	var req offsetReq
	if !readJSON(w, r, &req) || !a.lead(w, r, a.gs.GroupOf(req.Queue)) {
		return
	}
	if err := a.gs.ResetOffset(req.Group, req.Topic, req.Queue, req.Offset); err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
}

// handleOffsets answers a consumer group's replicated committed offset of
// a queue (any node; a follower may lag).
func (a *api) handleOffsets(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	queue, err := strconv.Atoi(q.Get("queue"))
	if err != nil || queue < 0 {
		writeErr(w, fmt.Errorf("offsets: queue must be an integer >= 0: %w", replica.ErrInvalid))
		return
	}
	off, ok := a.gs.Committed(q.Get("group"), q.Get("topic"), queue)
	writeJSON(w, http.StatusOK, map[string]any{"offset": off, "committed": ok, "raft_group": a.gs.GroupOf(queue)})
}

const maxRequestBody = 8 << 20

func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxRequestBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeErr(w, fmt.Errorf("request body: %v: %w", err, replica.ErrInvalid))
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// statusOf maps an error to its HTTP status.
func statusOf(err error) int {
	switch {
	case errors.Is(err, replica.ErrInvalid), errors.Is(err, replica.ErrRejected), errors.Is(err, store.ErrInvalid), errors.Is(err, brokercore.ErrInvalid), errors.Is(err, pop.ErrInvalid), errors.Is(err, schedule.ErrInvalid),
		errors.Is(err, pop.ErrBadHandle), errors.Is(err, store.ErrOffsetTooSmall):
		return http.StatusBadRequest
	case errors.Is(err, pop.ErrStaleHandle), errors.Is(err, replica.ErrStaleEpoch),
		errors.Is(err, replica.ErrDuplicateMember), errors.Is(err, replica.ErrLastVoter),
		errors.Is(err, schedule.ErrDelivered), errors.Is(err, schedule.ErrCancelled):
		return http.StatusConflict
	case errors.Is(err, replica.ErrUnknownMember), errors.Is(err, schedule.ErrTimerNotFound):
		return http.StatusNotFound
	case errors.Is(err, replica.ErrUnreachable):
		return http.StatusBadGateway
	case errors.Is(err, replica.ErrNotLeader), errors.Is(err, replica.ErrNotCommitted), errors.Is(err, pop.ErrLockTimeout),
		errors.Is(err, pop.ErrTooManyWaiters), errors.Is(err, replica.ErrClosed), errors.Is(err, pop.ErrClosed):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

func writeErr(w http.ResponseWriter, err error) {
	writeJSON(w, statusOf(err), map[string]string{"error": err.Error()})
}
