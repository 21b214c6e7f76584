package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
// the leader: a follower answers 307 Temporary Redirect to the same path on
// the leader's HTTP address (clients re-send the body), or 503 when no
// leader is known. /read and /status answer locally on any node.
//
//	POST /produce          {"topic","queue","messages":[{"body","tags","keys","properties"}],"delay_level"}
//	POST /pop              {"group","topic","queue","max","invisible_ms","poll_ms","filter"}
//	POST /ack              {"handle"}
//	POST /change-invisible {"handle","invisible_ms"}
//	POST /produce          {…,"deliver_at_ms"}  a timer (one message)
//	POST /cancel           {"uniq_key"}          cancel a pending timer
//	POST /members          {"id","raft_addr","http_addr"}   add a voter
//	POST /members/remove   {"id"}
//	GET  /read?topic=&queue=&offset=&max=
//	GET  /status
func Handler(n *replica.Node, addr string, now func() time.Time) http.Handler {
	if now == nil {
		now = time.Now
	}
	a := &api{n: n, addr: addr, now: now}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /produce", a.leaderOnly(a.handleProduce))
	mux.HandleFunc("POST /pop", a.leaderOnly(a.handlePop))
	mux.HandleFunc("POST /ack", a.leaderOnly(a.handleAck))
	mux.HandleFunc("POST /change-invisible", a.leaderOnly(a.handleChangeInvisible))
	mux.HandleFunc("POST /cancel", a.leaderOnly(a.handleCancel))
	mux.HandleFunc("POST /members", a.leaderOnly(a.handleAddMember))
	mux.HandleFunc("POST /members/remove", a.leaderOnly(a.handleRemoveMember))
	mux.HandleFunc("GET /read", a.handleRead)
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, n.Status()) })
	return mux
}

// api is the HTTP API of one node.
type api struct {
	n    *replica.Node
	addr string // this node's HTTP address (replica.Config.Addr)
	now  func() time.Time
}

// leaderOnly redirects to the leader unless this node leads.
func (a *api) leaderOnly(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if a.n.IsLeader() {
			h(w, r)
			return
		}
		id, addr := a.n.Leader()
		err := &replica.NotLeaderError{Node: a.n.ID(), LeaderID: id, LeaderAddr: addr}
		if addr != "" && addr != a.addr {
			w.Header().Set("Location", "http://"+addr+r.URL.RequestURI())
			writeJSON(w, http.StatusTemporaryRedirect, map[string]string{"error": err.Error(), "leader": addr})
			return
		}
		writeErr(w, err)
	}
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
	if !readJSON(w, r, &req) {
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
		if m, err = a.n.ProduceAt(msgs[0], time.UnixMilli(req.DeliverAt)); err == nil {
			out = []*store.Message{m}
		}
	case req.DelayLevel != 0:
		var m *store.Message
		if m, err = a.n.ProduceDelayed(msgs[0], req.DelayLevel); err == nil {
			out = []*store.Message{m}
		}
	default:
		out, err = a.n.Produce(msgs...)
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
	}
	ctx, cancel := context.WithTimeout(r.Context(), time.Duration(req.PollMS)*time.Millisecond+5*time.Second)
	defer cancel()
	res, err := a.n.Pop(ctx, pop.Request{Group: req.Group, Topic: req.Topic, QueueID: q, Max: req.Max,
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
	if !readJSON(w, r, &req) {
		return
	}
	if err := a.n.Ack(req.Handle); err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
}

func (a *api) handleChangeInvisible(w http.ResponseWriter, r *http.Request) {
	var req handleReq
	if !readJSON(w, r, &req) {
		return
	}
	h, err := a.n.ChangeInvisible(req.Handle, time.Duration(req.InvisibleMS)*time.Millisecond)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"handle": h})
}

func (a *api) handleCancel(w http.ResponseWriter, r *http.Request) {
	var req struct {
		UniqKey string `json:"uniq_key"`
	}
	if !readJSON(w, r, &req) {
		return
	}
	if err := a.n.CancelTimer(req.UniqKey); err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
}

type memberReq struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	HTTPAddr string `json:"http_addr"`
}

func (a *api) handleAddMember(w http.ResponseWriter, r *http.Request) {
	var req memberReq
	if !readJSON(w, r, &req) {
		return
	}
	if err := a.n.AddMember(req.ID, req.RaftAddr, req.HTTPAddr); err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, a.n.Status())
}

func (a *api) handleRemoveMember(w http.ResponseWriter, r *http.Request) {
	var req memberReq
	if !readJSON(w, r, &req) {
		return
	}
	if err := a.n.RemoveMember(req.ID); err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, a.n.Status())
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
	msgs, err := a.n.Read(q.Get("topic"), queue, offset, maxN)
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
