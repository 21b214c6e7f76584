package server

import (
	"errors"

	"github.com/brokercore/brokercore/txn"
)

// transactionChecker is the part of a protocol handler that asks one of its
// producers of a group about a transaction (the remoting broker over a
// producer's connection, the gRPC service over a producer's Telemetry
// stream).
type transactionChecker interface {
	CheckTransaction(c txn.Check) error
}

// errNoProducer is the check's answer when no protocol has a live
// producer of the group.
var errNoProducer = errors.New("server: no live producer of the group on any protocol")

// checkTransaction is the core's txn.Checker: the remoting broker's
// producers of the group first, then the gRPC service's. A check one
// protocol cannot deliver goes to the next.
func (s *Server) checkTransaction(c txn.Check) error {
	errs := []error{errNoProducer}
	for _, h := range []any{s.broker, s.grpc} {
		tc, ok := h.(transactionChecker)
		if !ok || h == nil {
			continue
		}
		err := tc.CheckTransaction(c)
		if err == nil {
			return nil
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// startTransactions hands the core's transaction manager the protocols'
// checker, unless Config.Core.Txn set one. Called once every protocol
// handler exists.
func (s *Server) startTransactions() {
	if s.cfg.Core.Txn.Checker == nil {
		s.core.Transactions().SetChecker(txn.CheckerFunc(s.checkTransaction))
	}
}
