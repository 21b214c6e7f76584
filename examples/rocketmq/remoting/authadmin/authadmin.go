// Package authadmin serves Apache RocketMQ 5.3's user and ACL admin
// requests (AUTH_CREATE_USER 3001 … AUTH_LIST_ACL 3010) on the broker's
// remoting port, on an acl.Authorizer: the headers, JSON bodies, answers
// and error codes of Apache's AdminBrokerProcessor, so Apache's mqadmin
// (createUser, createAcl, …) and this module's Go mqadmin work unchanged.
//
// A change takes effect at once (as a SIGHUP reload does) and is written
// to the ACL file first (atomically; Options.File), so a failed write
// changes nothing and a restart finds what was answered SUCCESS. Bad input
// is answered with Apache's code and a remark and changes nothing.
//
// Who may call them is decided in front of this handler (remoteacl):
// Update on "*" for the changes, Get on "*" for the reads (Apache: Update
// or Get on the cluster), which a super user has. As in Apache, only a
// super user may create, update or delete a super user.
//
// Differences from Apache, which keeps users and ACLs in RocksDB: the
// rules live in the acl package's file, so a subject is "User:name" (a
// bare "name" is accepted too), resources are Topic:, Group: and "*" only
// (Cluster: and Namespace: are refused), every policy is of type Custom
// (Default is refused), and a rule of the file naming several resources is
// shown as one entry per resource.
package authadmin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/brokercore/brokercore/acl"
	"github.com/brokercore/brokercore/examples/rocketmq/internal/atomicfile"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/transport"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
)

// Apache's request codes (RequestCode.AUTH_*).
const (
	CodeCreateUser int16 = 3001
	CodeUpdateUser int16 = 3002
	CodeDeleteUser int16 = 3003
	CodeGetUser    int16 = 3004
	CodeListUser   int16 = 3005
	CodeCreateACL  int16 = 3006
	CodeUpdateACL  int16 = 3007
	CodeDeleteACL  int16 = 3008
	CodeGetACL     int16 = 3009
	CodeListACL    int16 = 3010
)

// InvalidParameter is Apache's ResponseCode.INVALID_PARAMETER (29).
const InvalidParameter int16 = 29

// IsAuthAdmin reports whether code is one of the requests served here.
func IsAuthAdmin(code int16) bool { return code >= CodeCreateUser && code <= CodeListACL }

// IsRead reports whether code only reads (get and list).
func IsRead(code int16) bool {
	switch code {
	case CodeGetUser, CodeListUser, CodeGetACL, CodeListACL:
		return true
	}
	return false
}

// systemErrorRemark is Apache's remark for a failure that is not the
// request's fault.
const systemErrorRemark = "An system error occurred, please try again later."

// Options configure a Service.
type Options struct {
	// File is the ACL file the authorizer was loaded from: every change is
	// written there (atomically) before it takes effect. "" keeps changes
	// in memory only.
	File string
	// Logger receives every change (INFO) and failed write (ERROR); nil
	// discards.
	Logger *slog.Logger
}

// Service answers the AUTH_* requests on an Authorizer.
type Service struct {
	az   *acl.Authorizer
	opts Options
	log  *slog.Logger
}

// New is a Service on az.
func New(az *acl.Authorizer, opts Options) *Service {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{az: az, opts: opts, log: log}
}

// Serve answers req if it is an AUTH_* request, and returns nil otherwise.
func (s *Service) Serve(req *wire.Command) *wire.Command {
	var r result
	switch req.Code {
	case CodeCreateUser:
		r = s.createUser(req)
	case CodeUpdateUser:
		r = s.updateUser(req)
	case CodeDeleteUser:
		r = s.deleteUser(req)
	case CodeGetUser:
		r = s.getUser(req)
	case CodeListUser:
		r = s.listUser(req)
	case CodeCreateACL, CodeUpdateACL:
		r = s.putACL(req)
	case CodeDeleteACL:
		r = s.deleteACL(req)
	case CodeGetACL:
		r = s.getACL(req)
	case CodeListACL:
		r = s.listACL(req)
	default:
		return nil
	}
	if r.code != wire.Success {
		s.log.Info("auth admin request refused", "code", req.Code, "user", req.ExtFields[acl.FieldAccessKey],
			"response", r.code, "err", r.remark)
	}
	resp := wire.NewResponse(req, r.code, r.remark)
	resp.Body = r.body
	return resp
}

// result is an answer: Apache's response code, remark and body.
type result struct {
	code   int16
	remark string
	body   []byte
}

func ok(body []byte) result { return result{code: wire.Success, body: body} }

func fail(code int16, format string, args ...any) result {
	return result{code: code, remark: fmt.Sprintf(format, args...)}
}

// refusal is an edit's refusal carrying its answer.
type refusal struct{ r result }

func (e *refusal) Error() string { return e.r.remark }

func refuse(code int16, format string, args ...any) error {
	return &refusal{fail(code, format, args...)}
}

// errUnchanged: the edit found nothing to change; the answer is SUCCESS
// and the file is not rewritten.
var errUnchanged = errors.New("nothing to change")

// edit applies fn to the configuration through the Authorizer: checked,
// written to the file, then in force. A refusal is answered as it says;
// any other failure (the file could not be written) is SYSTEM_ERROR and
// changes nothing.
func (s *Service) edit(req *wire.Command, fn func(*acl.Config) error) result {
	err := s.az.Edit(fn, s.persist)
	var ref *refusal
	switch {
	case err == nil:
		s.log.Info("acl changed by an admin request", "code", req.Code, "user", req.ExtFields[acl.FieldAccessKey],
			"file", s.opts.File)
		return ok(nil)
	case errors.Is(err, errUnchanged):
		return ok(nil)
	case errors.As(err, &ref):
		return ref.r
	case errors.Is(err, acl.ErrInvalid):
		return fail(wire.NoPermission, "%v", err)
	}
	s.log.Error("acl change failed; nothing changed", "code", req.Code, "file", s.opts.File, "err", err)
	return fail(wire.SystemError, systemErrorRemark)
}

// persist writes cfg to the ACL file, atomically.
func (s *Service) persist(cfg *acl.Config) error {
	if s.opts.File == "" {
		return nil
	}
	data, err := cfg.Marshal()
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(s.opts.File, data, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", s.opts.File, err)
	}
	return nil
}

// callerIsSuper is Apache's !isNotSuperUserLogin: the request's access key
// is a super user's (remoteacl verified its signature in front of us).
func (s *Service) callerIsSuper(req *wire.Command) bool {
	return s.az.IsSuperUser(req.ExtFields[acl.FieldAccessKey])
}

// Handler is a transport.Handler answering the AUTH_* requests with a
// Service and passing everything else to the handler it wraps, whose
// optional capabilities (inline, batch, connection observer) it keeps.
type Handler struct {
	h   transport.Handler
	svc *Service
}

// Wrap puts svc in front of h.
func Wrap(h transport.Handler, svc *Service) *Handler { return &Handler{h: h, svc: svc} }

// Serve implements transport.Handler.
func (h *Handler) Serve(ctx context.Context, c *transport.Conn, req *wire.Command) *wire.Command {
	if resp := h.svc.Serve(req); resp != nil {
		return resp
	}
	return h.h.Serve(ctx, c, req)
}

// Inline implements transport.InlineHandler: never for an AUTH_* request
// (it writes a file), as the wrapped handler otherwise.
func (h *Handler) Inline(req *wire.Command) bool {
	ih, ok := h.h.(transport.InlineHandler)
	return ok && !IsAuthAdmin(req.Code) && ih.Inline(req)
}

// Batch implements transport.BatchHandler: as the wrapped handler.
func (h *Handler) Batch(req *wire.Command) bool {
	bh, ok := h.h.(transport.BatchHandler)
	return ok && !IsAuthAdmin(req.Code) && bh.Batch(req)
}

// DeferBatch implements transport.DeferredBatchHandler: as the wrapped
// handler.
func (h *Handler) DeferBatch(req *wire.Command) bool {
	dh, ok := h.h.(transport.DeferredBatchHandler)
	return ok && !IsAuthAdmin(req.Code) && dh.DeferBatch(req)
}

// ServeBatch implements transport.BatchHandler: only requests Batch or
// DeferBatch accepted reach it, none of them ours.
func (h *Handler) ServeBatch(ctx context.Context, c *transport.Conn, reqs []*wire.Command) []*wire.Command {
	return h.h.(transport.BatchHandler).ServeBatch(ctx, c, reqs)
}

// ConnOpened implements transport.ConnObserver: as the wrapped handler.
func (h *Handler) ConnOpened(c *transport.Conn) {
	if o, ok := h.h.(transport.ConnObserver); ok {
		o.ConnOpened(c)
	}
}

// ConnClosed implements transport.ConnObserver: as the wrapped handler.
func (h *Handler) ConnClosed(c *transport.Conn) {
	if o, ok := h.h.(transport.ConnObserver); ok {
		o.ConnClosed(c)
	}
}
