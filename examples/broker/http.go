package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/brokercore/brokercore/txn"
)

// Server timeouts (the write timeout is Config.WriteTimeout). A
// long-polling pop extends its own write deadline past its Poll (see
// handlePop), so the write timeout only has to cover ordinary requests.
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 30 * time.Second
	idleTimeout       = 120 * time.Second
	maxHeaderBytes    = 64 << 10
)

// apiError is the JSON body of every non-2xx answer:
//
//	{"error":"topic: must not be empty","code":"bad_request","field":"topic"}
type apiError struct {
	Status  int    `json:"-"`
	Message string `json:"error"`
	Code    string `json:"code"`
	Field   string `json:"field,omitempty"`
}

func (e *apiError) Error() string { return e.Message }

// badField is the 400 answer for one invalid request field.
func badField(field, format string, args ...any) *apiError {
	return &apiError{
		Status:  http.StatusBadRequest,
		Message: field + ": " + fmt.Sprintf(format, args...),
		Code:    "bad_request",
		Field:   field,
	}
}

// httpStats counts what the HTTP layer saw; GET /v1/stats reports it.
type httpStats struct {
	Requests    atomic.Int64
	Rejected    atomic.Int64 // 4xx answers
	Failed      atomic.Int64 // 5xx answers
	OpenConns   atomic.Int64
	LongPolls   atomic.Int64 // pops waiting right now
	ClosedChans atomic.Int64 // connections that carried a heartbeat and closed
}

// HTTPStats is the plain snapshot of httpStats.
type HTTPStats struct {
	Requests    int64 `json:"requests"`
	Rejected    int64 `json:"rejected"`
	Failed      int64 `json:"failed"`
	OpenConns   int64 `json:"open_conns"`
	LongPolls   int64 `json:"long_polls"`
	ClosedChans int64 `json:"closed_channels"`
}

func (s *httpStats) snapshot() HTTPStats {
	return HTTPStats{
		Requests:    s.Requests.Load(),
		Rejected:    s.Rejected.Load(),
		Failed:      s.Failed.Load(),
		OpenConns:   s.OpenConns.Load(),
		LongPolls:   s.LongPolls.Load(),
		ClosedChans: s.ClosedChans.Load(),
	}
}

// route is one endpoint of the API.
type route struct {
	method, pattern string
	h               func(w http.ResponseWriter, r *http.Request) (any, error)
}

func (b *Broker) routes() []route {
	return []route{
		{"POST", "/v1/messages", b.handleProduce},
		{"POST", "/v1/messages/batch", b.handleProduceBatch},
		{"POST", "/v1/timers/cancel", b.handleCancelTimer},
		{"POST", "/v1/pop", b.handlePop},
		{"POST", "/v1/ack", b.handleAck},
		{"POST", "/v1/change-invisible", b.handleChangeInvisible},
		{"POST", "/v1/lock", b.handleLock},
		{"POST", "/v1/lock-batch", b.handleLockBatch},
		{"POST", "/v1/unlock", b.handleUnlock},
		{"GET", "/v1/lock", b.handleHolder},
		{"POST", "/v1/heartbeat", b.handleHeartbeat},
		{"POST", "/v1/unregister", b.handleUnregister},
		{"GET", "/v1/groups/{group}/clients", b.handleClients},
		{"POST", "/v1/offsets/commit", b.handleCommit},
		{"GET", "/v1/offsets", b.handleQueryOffset},
		{"POST", "/v1/offsets/reset", b.handleReset},
		{"POST", "/v1/transactions", b.handlePrepare},
		{"POST", "/v1/transactions/checks", b.handleChecks},
		{"POST", "/v1/transactions/{id}/commit", b.handleEnd(txn.Commit)},
		{"POST", "/v1/transactions/{id}/rollback", b.handleEnd(txn.Rollback)},
		{"GET", "/v1/stats", b.handleStats},
		{"GET", "/stats", b.handleStats},
		{"GET", "/healthz", func(http.ResponseWriter, *http.Request) (any, error) {
			return map[string]string{"status": "ok"}, nil
		}},
	}
}

// Handler returns the broker's HTTP API. Routes use Go 1.22 method patterns;
// the README lists them with curl lines. A known path with the wrong
// method is a 405 with an Allow header; an unknown path a 404; both JSON.
func (b *Broker) Handler() http.Handler {
	mux := http.NewServeMux()
	allow := map[string][]string{}
	var patterns []string
	for _, rt := range b.routes() {
		mux.HandleFunc(rt.method+" "+rt.pattern, b.api(rt.h))
		if allow[rt.pattern] == nil {
			patterns = append(patterns, rt.pattern)
		}
		allow[rt.pattern] = append(allow[rt.pattern], rt.method)
		if rt.method == http.MethodGet {
			allow[rt.pattern] = append(allow[rt.pattern], http.MethodHead) // GET patterns serve HEAD too
		}
	}
	// A pattern without a method is less specific than those with one, so
	// it only sees the methods nothing else takes.
	for _, p := range patterns {
		methods := allow[p]
		slices.Sort(methods)
		mux.HandleFunc(p, b.api(func(w http.ResponseWriter, r *http.Request) (any, error) {
			w.Header().Set("Allow", strings.Join(methods, ", "))
			return nil, &apiError{
				Status:  http.StatusMethodNotAllowed,
				Message: r.Method + " " + r.URL.Path + ": method not allowed; use " + strings.Join(methods, " or "),
				Code:    "method_not_allowed",
			}
		}))
	}
	mux.HandleFunc("/", b.api(func(_ http.ResponseWriter, r *http.Request) (any, error) {
		return nil, &apiError{Status: http.StatusNotFound, Message: "no such endpoint: " + r.Method + " " + r.URL.Path, Code: "not_found"}
	}))
	return b.count(mux)
}

// NewServer returns an http.Server for the broker's API with every timeout
// set and each connection tracked as a consumer channel. It wakes long polls
// when Shutdown starts.
func (b *Broker) NewServer(addr string) *http.Server {
	srv := &http.Server{
		Addr:              addr,
		Handler:           b.Handler(),
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      b.cfg.WriteTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ConnContext:       b.connContext,
		ConnState:         b.connState,
		ErrorLog:          slog.NewLogLogger(b.log.Handler(), slog.LevelWarn),
	}
	// Shutdown closes the listeners first, then runs this: long polls end
	// at once instead of holding Shutdown for their whole Poll.
	srv.RegisterOnShutdown(b.wakePolls)
	return srv
}

// statusWriter remembers the status for the counters.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection (write deadline).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (b *Broker) count(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.httpStats.Requests.Add(1)
		sw := &statusWriter{ResponseWriter: w}
		start := time.Now()
		next.ServeHTTP(sw, r)
		b.log.Debug("request", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr,
			"status", sw.status, "took", time.Since(start))
		switch {
		case sw.status >= 500:
			b.httpStats.Failed.Add(1)
		case sw.status >= 400:
			b.httpStats.Rejected.Add(1)
		}
	})
}

// api adapts a handler that returns (response, error) to net/http: the
// response is written as JSON 200, an *apiError with its status, and any
// other error through the package error table (errors.go).
func (b *Broker) api(h func(w http.ResponseWriter, r *http.Request) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		// Every body is size-limited before anything reads it.
		r.Body = http.MaxBytesReader(w, r.Body, b.cfg.MaxBody)
		resp, err := h(w, r)
		if err != nil {
			ae := b.toAPIError(err)
			switch {
			case ae.Status == statusClientGone:
				b.log.Debug("client went away", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)
			case ae.Status >= 500 && ae.Code != "shutting_down":
				b.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
			default:
				b.log.Debug("request rejected", "method", r.Method, "path", r.URL.Path,
					"remote", r.RemoteAddr, "status", ae.Status, "code", ae.Code, "field", ae.Field, "err", ae.Message)
			}
			if ae.Status == http.StatusServiceUnavailable {
				w.Header().Set("Retry-After", "1")
			}
			writeJSON(w, ae.Status, ae)
			return
		}
		writeJSON(w, http.StatusOK, resp)
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	_ = enc.Encode(v) // the client may be gone; nothing to do about it
}

// decode reads exactly one JSON object into v. Unknown fields, trailing data,
// wrong types and oversized bodies are 400/413 answers naming the field.
func decode(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err)
	}
	if err := dec.Decode(&struct{}{}); err != io.EOF {
		if err != nil {
			if ae := decodeError(err); ae.Status == http.StatusRequestEntityTooLarge {
				return ae
			}
		}
		return badField("body", "must hold exactly one JSON object")
	}
	return nil
}

func decodeError(err error) *apiError {
	var (
		tooBig  *http.MaxBytesError
		typeErr *json.UnmarshalTypeError
		synErr  *json.SyntaxError
	)
	switch {
	case errors.As(err, &tooBig):
		return &apiError{
			Status:  http.StatusRequestEntityTooLarge,
			Message: fmt.Sprintf("body: larger than %d bytes", tooBig.Limit),
			Code:    "body_too_large",
			Field:   "body",
		}
	case errors.As(err, &typeErr):
		field := typeErr.Field
		if field == "" {
			field = "body"
		}
		return badField(field, "must be a JSON %s, not %s", jsonKind(typeErr.Type.Kind().String()), typeErr.Value)
	case errors.As(err, &synErr):
		return badField("body", "invalid JSON at byte %d: %v", synErr.Offset, err)
	case errors.Is(err, io.EOF):
		return badField("body", "empty; a JSON object is required")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badField("body", "truncated JSON")
	}
	// encoding/json reports an unknown field only as text.
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		name = strings.Trim(name, `"`)
		return badField(name, "unknown field")
	}
	return badField("body", "%v", err)
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "string"
	case "bool":
		return "boolean"
	case "slice", "array":
		return "array"
	case "map", "struct", "ptr":
		return "object"
	default:
		return "number"
	}
}
