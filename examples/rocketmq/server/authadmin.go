package server

import (
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/authadmin"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/transport"
)

// authAdmin serves Apache 5.3's user and ACL admin requests (AUTH_* 3001…
// 3010) on the broker port in front of h while ACL is on; they change
// Config.ACL and Config.ACLFile. With ACL off they are not served (h answers
// REQUEST_CODE_NOT_SUPPORTED): there are no users to manage.
func (s *Server) authAdmin(h transport.Handler) transport.Handler {
	if s.cfg.ACL == nil {
		return h
	}
	return authadmin.Wrap(h, authadmin.New(s.cfg.ACL, authadmin.Options{File: s.cfg.ACLFile,
		Logger: s.log.With("listener", "broker")}))
}
