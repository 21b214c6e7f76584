package server

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"

	"github.com/brokercore/brokercore/acl"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/remoteacl"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/transport"
)

// ErrInsecureListen is Start's refusal to listen beyond loopback without
// access control (Config.ACL nil) unless Config.InsecureAllowRemote says so.
var ErrInsecureListen = errors.New("server: refusing to listen on a non-loopback address with ACL off (set an ACL file, or allow it explicitly with -insecure-allow-remote)")

// ACL is the program's access control (nil when off).
func (s *Server) ACL() *acl.Authorizer { return s.cfg.ACL }

// guard puts the ACL in front of a remoting handler (the handler itself
// when ACL is off): every request authenticated by its AccessKey and
// Signature, and authorized per resource before the handler sees it.
func (s *Server) guard(h transport.Handler, name string) transport.Handler {
	if s.cfg.ACL == nil {
		return h
	}
	return remoteacl.Wrap(h, s.cfg.ACL, remoteacl.Options{TopicAt: s.topicAt, Logger: s.log.With("listener", name)})
}

// topicAt is the topic of the message at a log offset (what a send-back
// names).
func (s *Server) topicAt(off int64) (string, error) {
	m, err := s.core.Store().ReadAt(off)
	if err != nil {
		return "", err
	}
	return m.Topic, nil
}

// checkListen refuses a non-loopback listen address while ACL is off,
// unless the configuration allows it explicitly.
func (cfg Config) checkListen() error {
	if cfg.ACL != nil || cfg.InsecureAllowRemote {
		return nil
	}
	addrs := map[string]string{"broker": cfg.BrokerAddr, "name server": cfg.NameSrvAddr, "gRPC": cfg.GRPCAddr}
	if cfg.MetricsAddr != "-" {
		addrs["metrics/admin"] = cfg.MetricsAddr
	}
	for what, a := range addrs {
		if a == "" || a == "-" {
			continue
		}
		if !Loopback(a) {
			return fmt.Errorf("%w: %s address %s", ErrInsecureListen, what, a)
		}
	}
	return nil
}

// Loopback reports whether a listen address binds loopback only. An empty
// host (":9876") or a name other than localhost binds beyond it.
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// HTTPAuth guards the metrics and admin HTTP endpoint (a single broker's
// and a replicated node's) with the program's ACL (nil = open).
type HTTPAuth struct {
	ACL *acl.Authorizer
	// PublicMetrics serves /metrics without credentials while ACL is on.
	PublicMetrics bool
	Log           *slog.Logger
}

func (s *Server) httpAuth() HTTPAuth {
	return HTTPAuth{ACL: s.cfg.ACL, PublicMetrics: s.cfg.PublicMetrics, Log: s.log}
}

func (s *Server) adminAuth(act acl.Action, h http.HandlerFunc) http.HandlerFunc {
	return s.httpAuth().Admin(act, h)
}

func (s *Server) metricsAuth(h http.Handler) http.Handler { return s.httpAuth().Metrics(h) }

// Admin guards an admin endpoint: with ACL on, the call needs HTTP Basic
// credentials (access key and secret key of a user in the ACL file) of a
// user allowed act on the group the call names (?group=): Update for a
// reset, Get for reading offsets. A super user may do both. Refusals are
// 401 (no or bad credentials) and 403 (not allowed), and change nothing.
func (a HTTPAuth) Admin(act acl.Action, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		user, ok := a.user(w, r)
		if !ok {
			return
		}
		if a.ACL == nil {
			h(w, r)
			return
		}
		q := r.URL.Query()
		need := []acl.Resource{acl.Group(q.Get("group"))}
		if t := q.Get("topic"); t != "" {
			need = append(need, acl.Topic(t))
		}
		for _, res := range need {
			if _, err := a.ACL.Authorize(user, res, act, remoteIP(r)); err != nil {
				a.Log.Info("admin call denied", "path", r.URL.Path, "user", user, "resource", res.String(),
					"action", act.String(), "client", r.RemoteAddr)
				httpError(w, http.StatusForbidden, err.Error())
				return
			}
		}
		h(w, r)
	}
}

// Metrics guards /metrics: with ACL on, any user's Basic credentials,
// unless PublicMetrics.
func (a HTTPAuth) Metrics(h http.Handler) http.Handler {
	if a.PublicMetrics {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := a.user(w, r); ok {
			h.ServeHTTP(w, r)
		}
	})
}

// user authenticates r's Basic credentials when ACL is on, answering 401
// itself when they fail.
func (a HTTPAuth) user(w http.ResponseWriter, r *http.Request) (string, bool) {
	if a.ACL == nil {
		return "", true
	}
	ak, sk, _ := r.BasicAuth()
	user, err := a.ACL.AuthenticateSecret(ak, sk)
	if err != nil {
		a.Log.Info("admin call unauthenticated", "path", r.URL.Path, "user", ak, "client", r.RemoteAddr, "err", err)
		w.Header().Set("WWW-Authenticate", `Basic realm="rocketmq"`)
		httpError(w, http.StatusUnauthorized, "credentials required: HTTP Basic with an ACL user's access key and secret key")
		return "", false
	}
	return user, true
}

func remoteIP(r *http.Request) netip.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}
