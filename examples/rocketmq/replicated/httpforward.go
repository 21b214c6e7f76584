package replicated

import (
	"fmt"
	"net/http"
	"regexp"
	"strconv"

	"github.com/brokercore/brokercore/acl"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/broker"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
	"github.com/brokercore/brokercore/examples/rocketmq/server"
)

// forwardReset is a follower's POST /admin/reset: the caller's credentials
// were checked here (server.HTTPAuth.Admin); the reset goes to the leader's
// broker as INVOKE_BROKER_TO_RESET_OFFSET, the way the handler forwards a
// remoting one (forward.go), and the leader's result is answered. With ACL
// on it carries the caller's access key and a signature made with the
// caller's secret key (the Basic credentials), under the mark only a
// member makes (acl.go): the leader checks them against its rules, with
// the caller's address, as any forwarded request's.
func (s *Server) forwardReset(w http.ResponseWriter, r *http.Request, rr server.ResetRequest) *server.HTTPError {
	id, addr := s.node.Leader()
	if addr == "" || addr == s.brAddr {
		return &server.HTTPError{Status: http.StatusServiceUnavailable, Msg: fmt.Sprintf("%v: this node (%s) does not lead and knows no leader "+
			"(an election is under way, or a majority is unreachable); nothing moved, try again", errNoLeader, s.cfg.ID)}
	}
	cmd := resetCommand(r, rr)
	if s.gate != nil {
		ak, sk, _ := r.BasicAuth() // authenticated by HTTPAuth.Admin
		cmd.ExtFields[acl.FieldAccessKey] = ak
		cmd.ExtFields[acl.FieldSignature] = acl.SignRemoting(sk, cmd.ExtFields, cmd.Body)
		cmd = markForward(s.gate.key, r.RemoteAddr, cmd)
	}
	resp, err := s.fwd.call(r.Context(), addr, cmd)
	if err == nil && resp == nil {
		err = fmt.Errorf("no answer")
	}
	if err != nil {
		s.log.Info("reset not forwarded to the leader", "leader", addr, "err", err)
		return &server.HTTPError{Status: http.StatusServiceUnavailable, Msg: fmt.Sprintf("forward to the leader %s (broker %s): %v; try again", id, addr, err)}
	}
	if resp.Code != wire.Success {
		return &server.HTTPError{Status: resetStatus(resp.Code), Msg: fmt.Sprintf("the leader %s (broker %s) answered code %d: %s", id, addr, resp.Code, resp.Remark)}
	}
	out, err := parseResetBody(resp.Body)
	if err != nil {
		return &server.HTTPError{Status: http.StatusBadGateway, Msg: fmt.Sprintf("the leader %s (broker %s) answered: %v", id, addr, err)}
	}
	s.log.Info("offset reset forwarded to the leader", "group", rr.Group, "topic", rr.Topic, "queues", len(out), "leader", id)
	writeResetAnswer(w, rr, out)
	return nil
}

// resetCommand is rr as mqadmin's INVOKE_BROKER_TO_RESET_OFFSET (a time to
// the millisecond: the remoting field's unit).
func resetCommand(r *http.Request, rr server.ResetRequest) *wire.Command {
	ext := map[string]string{"group": rr.Group, "topic": rr.Topic, "queueId": "-1", "timestamp": "0"}
	if r.URL.Query().Get("queue") != "" && len(rr.Queues) == 1 {
		ext["queueId"] = strconv.Itoa(rr.Queues[0])
	}
	if rr.Offset >= 0 {
		ext["offset"] = strconv.FormatInt(rr.Offset, 10)
	} else {
		ext["timestamp"] = strconv.FormatInt(rr.Time.UnixMilli(), 10)
	}
	return &wire.Command{Code: broker.CodeInvokeBrokerToResetOffset, Language: "GO", Version: 317, ExtFields: ext}
}

// resetStatus is the HTTP status of a leader's refusal: one to retry
// (raft did not commit it, the leader changed) is 503.
func resetStatus(code int16) int {
	switch code {
	case wire.SystemError, wire.ServiceNotAvailable:
		return http.StatusServiceUnavailable
	case wire.NoPermission:
		return http.StatusForbidden
	}
	return http.StatusBadRequest
}

// resetEntry is one queue of a ResetOffsetBody (meta.ResetOffsetBody):
// fastjson's map with MessageQueue keys, {"topic":…,"brokerName":…,
// "queueId":Q}:OFFSET, which encoding/json cannot read.
var resetEntry = regexp.MustCompile(`"queueId":(\d+)\}:(-?\d+)`)

func parseResetBody(body []byte) ([]resetQueue, error) {
	var out []resetQueue
	for _, m := range resetEntry.FindAllSubmatch(body, -1) {
		q, err1 := strconv.Atoi(string(m[1]))
		off, err2 := strconv.ParseInt(string(m[2]), 10, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("unreadable reset body %q", body)
		}
		out = append(out, resetQueue{Queue: q, Offset: off})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("a reset body without queues: %q", body)
	}
	return out, nil
}
