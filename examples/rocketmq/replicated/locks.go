package replicated

import (
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
)

// Orderly queue locks (LOCK_BATCH_MQ, UNLOCK_BATCH_MQ) are not replicated:
// every node keeps its own lock table, as every Apache broker does.
// Apache's (broker/.../client/rebalance/RebalanceLockManager.java) is in
// memory and per broker; with the default lockInStrictMode=false
// (common/.../BrokerConfig.java) AdminBrokerProcessor.lockBatchMQ answers
// from the broker's own table alone, so a new master starts with an empty
// one and the clients lock their queues there again at their next lock
// round (every 20 s: the Java client's rocketmq.client.rebalance.lockInterval,
// the v2 client's RebalanceLockInterval). Only lockInStrictMode locks on
// a quorum of the replica set. Apache's clients lock at the master only
// (RebalanceImpl.lock: findBrokerAddressInSubscribe(brokerName, MASTER_ID,
// true)), and so do they here: the routes' master of "broker-a" is the
// leader.
//
// A follower is reached with a lock only by a client whose routes still
// name the old leader (it refreshes them every 30 s). It grants nothing:
// it answers SUCCESS with an empty lockOKMQSet, on which the v2 client
// marks those queues unlocked and stops consuming them, until it locks
// them at the leader its next route names. Had it granted from its own
// table, that client and one that locked at the new leader would both
// consume the queue. An UNLOCK_BATCH_MQ is every node's own (the leader's
// table is not touched by one sent to a follower).
//
// What remains, as in Apache without strict mode: a new leader's table is
// empty, so a client may lock a queue there while the one that held it at
// the old leader still consumes, until that one's next lock round (at
// most RebalanceLockInterval) finds it unlocked.

// grantNone is a follower's answer to LOCK_BATCH_MQ.
func (h *handler) grantNone(req *wire.Command) *wire.Command {
	_, addr := h.n.Leader()
	resp := wire.NewResponse(req, wire.Success, "not the leader: queue locks are granted by the leader "+addr)
	resp.Body = []byte(`{"lockOKMQSet":[]}`)
	return resp
}
