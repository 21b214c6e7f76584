package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/brokercore/brokercore/acl"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

func (s *Server) startHTTP() error {
	ln, err := net.Listen("tcp", s.cfg.MetricsAddr)
	if err != nil {
		return fmt.Errorf("metrics listener: %w", err)
	}
	s.httpLn = ln
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), &statsCollector{s: s})
	mux := http.NewServeMux()
	mux.Handle("/metrics", s.metricsAuth(promhttp.HandlerFor(reg, promhttp.HandlerOpts{})))
	mux.HandleFunc("/admin/reset", s.adminAuth(acl.Update, s.handleReset))
	mux.HandleFunc("/admin/offsets", s.adminAuth(acl.Get, s.handleOffsets))
	s.http = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := s.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("metrics listener stopped", "err", err)
		}
	}()
	return nil
}

// statsCollector exports every package's Stats at scrape time. It is an
// unchecked collector: the metric set follows the Stats structs.
type statsCollector struct{ s *Server }

func (c *statsCollector) Describe(chan<- *prometheus.Desc) {}

func (c *statsCollector) Collect(ch chan<- prometheus.Metric) {
	core := c.s.core
	emitStats(ch, "rocketmq_store", core.Store().Stats())
	emitStats(ch, "rocketmq_offset", core.Offsets().Stats())
	emitStats(ch, "rocketmq_lock", core.Locks().Stats())
	emitStats(ch, "rocketmq_consumer", core.Consumers().Stats())
	emitStats(ch, "rocketmq_pop", core.Pop().Stats())
	sched := core.Scheduler().Stats()
	levels := sched.Levels
	sched.Levels = nil
	emitStats(ch, "rocketmq_schedule", sched)
	for _, l := range levels {
		lbl := strconv.Itoa(l.Level)
		d := prometheus.NewDesc("rocketmq_schedule_level_delivered_total", "Messages delivered by delay level.", []string{"level"}, nil)
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(l.Delivered), lbl)
		d = prometheus.NewDesc("rocketmq_schedule_level_lag_seconds", "Lag of the oldest undelivered message by delay level.", []string{"level"}, nil)
		lag, _ := time.ParseDuration(l.Lag)
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, lag.Seconds(), lbl)
	}
	emitStats(ch, "rocketmq_broker", c.s.broker.Stats())
	emitStats(ch, "rocketmq_remoting_namesrv", c.s.nsrv.Stats())
	emitStats(ch, "rocketmq_remoting_broker", c.s.bsrv.Stats())
	if c.s.cfg.ACL != nil {
		emitStats(ch, "rocketmq_acl", c.s.cfg.ACL.Stats())
	}
	if g, ok := c.s.grpc.(prometheus.Collector); ok { // the gRPC listener's own series
		g.Collect(ch)
	}
}

// EmitStats sends a Stats struct's fields as metrics named prefix_field
// (a replicated node's collector uses it too): uint64 fields are counters,
// other numbers, bools and durations gauges (durations in seconds).
func EmitStats(ch chan<- prometheus.Metric, prefix string, stats any) { emitStats(ch, prefix, stats) }

// emitStats turns a Stats struct into metrics: uint64 fields are counters,
// other numbers, bools and durations gauges (durations in seconds).
func emitStats(ch chan<- prometheus.Metric, prefix string, stats any) {
	v := reflect.ValueOf(stats)
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		fv := v.Field(i)
		name := prefix + "_" + snake(f.Name)
		kind := prometheus.GaugeValue
		var x float64
		switch {
		case f.Type == reflect.TypeOf(time.Duration(0)):
			x, name = time.Duration(fv.Int()).Seconds(), name+"_seconds"
		case f.Type == reflect.TypeOf(time.Time{}):
			tm := fv.Interface().(time.Time)
			if tm.IsZero() {
				continue
			}
			x, name = float64(tm.UnixNano())/1e9, name+"_timestamp_seconds"
		case fv.Kind() == reflect.String:
			// Durations are strings in Stats ("1.5s").
			d, err := time.ParseDuration(fv.String())
			if err != nil {
				continue
			}
			x, name = d.Seconds(), name+"_seconds"
		case fv.Kind() == reflect.Uint64:
			x, kind, name = float64(fv.Uint()), prometheus.CounterValue, name+"_total"
		case fv.CanInt():
			x = float64(fv.Int())
		case fv.CanUint():
			x = float64(fv.Uint())
		case fv.Kind() == reflect.Bool:
			if fv.Bool() {
				x = 1
			}
		default:
			continue
		}
		d := prometheus.NewDesc(name, prefix+" Stats."+f.Name, nil, nil)
		ch <- prometheus.MustNewConstMetric(d, kind, x)
	}
}

func snake(s string) string {
	var b strings.Builder
	r := []rune(s)
	for i, c := range r {
		if unicode.IsUpper(c) {
			if i > 0 && (unicode.IsLower(r[i-1]) || (i+1 < len(r) && unicode.IsLower(r[i+1]))) {
				b.WriteByte('_')
			}
			c = unicode.ToLower(c)
		}
		b.WriteRune(c)
	}
	return b.String()
}

type resetResult struct {
	Queue  int    `json:"queue"`
	Offset int64  `json:"offset"`
	Epoch  uint64 `json:"epoch"`
}

// ResetRequest is a parsed POST /admin/reset (ParseReset): Group's offsets
// of Queues of Topic go to Offset, or when Offset is -1 to the first
// message at or after Time.
type ResetRequest struct {
	Group, Topic string
	Queues       []int
	Offset       int64
	Time         time.Time
}

// HTTPError is an admin call's refusal: its status and message.
type HTTPError struct {
	Status int
	Msg    string
}

func (e *HTTPError) Error() string { return e.Msg }

// Write answers the refusal as JSON {"error": Msg}.
func (e *HTTPError) Write(w http.ResponseWriter) { httpError(w, e.Status, e.Msg) }

// ParseReset parses an /admin/reset call (a single broker's and a
// replicated node's); queues is a topic's queue count, false when it does
// not exist:
//
//	POST /admin/reset?group=G&topic=T[&queue=Q]&offset=N
//	POST /admin/reset?group=G&topic=T[&queue=Q]&timestamp=<unix ms>
//	POST /admin/reset?group=G&topic=T[&queue=Q]&time=<RFC 3339>
func ParseReset(r *http.Request, queues func(topic string) (int, bool)) (ResetRequest, *HTTPError) {
	refuse := func(status int, msg string) (ResetRequest, *HTTPError) {
		return ResetRequest{}, &HTTPError{Status: status, Msg: msg}
	}
	if r.Method != http.MethodPost {
		return refuse(http.StatusMethodNotAllowed, "use POST")
	}
	q := r.URL.Query()
	rr := ResetRequest{Group: q.Get("group"), Topic: q.Get("topic"), Offset: -1}
	if rr.Group == "" || rr.Topic == "" {
		return refuse(http.StatusBadRequest, "group and topic are required")
	}
	n, ok := queues(rr.Topic)
	if !ok {
		return refuse(http.StatusNotFound, "topic "+rr.Topic+" does not exist")
	}
	if qs := q.Get("queue"); qs != "" {
		id, err := strconv.Atoi(qs)
		if err != nil || id < 0 || id >= n {
			return refuse(http.StatusBadRequest, fmt.Sprintf("queue %q: want 0..%d", qs, n-1))
		}
		rr.Queues = []int{id}
	} else {
		for i := 0; i < n; i++ {
			rr.Queues = append(rr.Queues, i)
		}
	}
	switch {
	case q.Get("offset") != "":
		v, err := strconv.ParseInt(q.Get("offset"), 10, 64)
		if err != nil || v < 0 {
			return refuse(http.StatusBadRequest, "offset must be a non-negative integer")
		}
		rr.Offset = v
	case q.Get("timestamp") != "":
		v, err := strconv.ParseInt(q.Get("timestamp"), 10, 64)
		if err != nil || v < 0 {
			return refuse(http.StatusBadRequest, "timestamp must be unix milliseconds")
		}
		rr.Time = time.UnixMilli(v)
	case q.Get("time") != "":
		v, err := time.Parse(time.RFC3339Nano, q.Get("time"))
		if err != nil {
			return refuse(http.StatusBadRequest, "time must be RFC 3339: "+err.Error())
		}
		rr.Time = v
	default:
		return refuse(http.StatusBadRequest, "one of offset, timestamp or time is required")
	}
	return rr, nil
}

// handleReset resets a group's offsets of a topic (ParseReset) through
// offset.Manager.Reset / ResetToTime.
func (s *Server) handleReset(w http.ResponseWriter, r *http.Request) {
	rr, herr := ParseReset(r, s.topics.Queues)
	if herr != nil {
		herr.Write(w)
		return
	}
	group, topic := rr.Group, rr.Topic
	offs, st := s.core.Offsets(), s.core.Store()
	var out []resetResult
	for _, id := range rr.Queues {
		var e uint64
		var err error
		target := rr.Offset
		if target >= 0 {
			if max := st.MaxOffset(topic, id); target > max {
				target = max
			}
			e, err = offs.Reset(group, topic, id, target)
		} else {
			e, err = offs.ResetToTime(group, topic, id, rr.Time, st)
			target, _ = offs.Committed(group, topic, id)
		}
		if err != nil {
			httpError(w, http.StatusBadRequest, err.Error())
			return
		}
		s.log.Info("offset reset", "group", group, "topic", topic, "queue", id, "offset", target, "epoch", e)
		out = append(out, resetResult{Queue: id, Offset: target, Epoch: e})
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"group": group, "topic": topic, "queues": out})
}

// handleOffsets shows a group's committed offsets of a topic:
// GET /admin/offsets?group=G&topic=T
func (s *Server) handleOffsets(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	group, topic := q.Get("group"), q.Get("topic")
	n, ok := s.topics.Queues(topic)
	if group == "" || !ok {
		httpError(w, http.StatusBadRequest, "group and an existing topic are required")
		return
	}
	type row struct {
		Queue     int    `json:"queue"`
		Committed *int64 `json:"committed,omitempty"`
		Epoch     uint64 `json:"epoch"`
		Max       int64  `json:"max"`
	}
	rows := make([]row, 0, n)
	for i := 0; i < n; i++ {
		off, e, ok := s.core.Offsets().Position(group, topic, i)
		r := row{Queue: i, Epoch: e, Max: s.core.Store().MaxOffset(topic, i)}
		if ok {
			r.Committed = &off
		}
		rows = append(rows, r)
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(rows)
}

func httpError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]string{"error": msg})
}
