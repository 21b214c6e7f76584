package txn

import (
	"fmt"
	"maps"
	"strconv"
	"time"

	"github.com/brokercore/brokercore/store"
)

// Properties of half messages and of the messages a commit appends (Apache
// RocketMQ's MessageConst names).
const (
	// PropRealTopic is the real topic of a half message.
	PropRealTopic = "REAL_TOPIC"
	// PropRealQueue is the real queue of a half message (decimal).
	PropRealQueue = "REAL_QID"
	// PropTransaction marks a transactional message ("true"); a committed
	// message no longer carries it.
	PropTransaction = "TRAN_MSG"
	// PropProducerGroup is the producer group a half is checked back with.
	PropProducerGroup = "PGROUP"
	// PropCheckImmunityTime (seconds) replaces Options.TransactionTimeout
	// for the first check of one message.
	PropCheckImmunityTime = "CHECK_IMMUNITY_TIME_IN_SECONDS"
	// PropCheckTimes is set on the message a Checker receives: how many
	// checks this one makes.
	PropCheckTimes = "TRANSACTION_CHECK_TIMES"
	// PropPreparedQueueOffset is set on a committed message: its
	// transaction's ID (the half's queue offset in HalfTopic).
	PropPreparedQueueOffset = "TRAN_PREPARED_QUEUE_OFFSET"
	// PropTransactionID is the client's transaction ID, kept as sent.
	PropTransactionID = "__transactionId__"
	// PropUniqKey is the client's message ID, kept as sent.
	PropUniqKey = "UNIQ_KEY"
)

// timed are the properties that would delay a message: refused on a
// transactional one.
var timed = []string{"DELAY", "TIMER_DELIVER_MS", "TIMER_DELAY_SEC", "TIMER_DELAY_MS", "__STARTDELIVERTIME"}

// Internal properties and tags of the records the Manager writes.
const (
	// propOpFloor on a half: OpTopic's next offset before the half was
	// appended. No op record about the half can sit below it.
	propOpFloor = "TRAN_OP_FLOOR"
	// propOp on an op record: what happened to the half named by its body.
	propOp = "TRAN_OP"
	// opTagDone is Apache's REMOVE_TAG, on records that close a half.
	opTagDone = "d"
	// opTagCheck is on check records.
	opTagCheck = "c"
	// opTagProbe is on probe records (settleUncertain).
	opTagProbe = "p"
)

// Resolution is how a transaction ends.
type Resolution int

// The resolutions a producer answers.
const (
	// Unknown leaves the transaction open: it will be checked.
	Unknown Resolution = iota
	// Commit delivers the message.
	Commit
	// Rollback discards it.
	Rollback
)

// String names the resolution ("commit", "rollback", "unknown").
func (r Resolution) String() string {
	switch r {
	case Commit:
		return "commit"
	case Rollback:
		return "rollback"
	case Unknown:
		return "unknown"
	}
	return "Resolution(" + strconv.Itoa(int(r)) + ")"
}

// Source says who sent a resolution: the producer on its own, or the
// producer answering a check.
type Source int

// The sources of a resolution.
const (
	// FromClient: the producer ended its transaction on its own.
	FromClient Source = iota
	// FromCheck: the producer answered a check-back.
	FromCheck
)

// String names the source ("client", "check").
func (s Source) String() string {
	if s == FromCheck {
		return "check"
	}
	return "client"
}

// opKind is what an op record says.
type opKind uint8

const (
	opCommit opKind = iota + 1
	opRollback
	opDiscard // rolled back past CheckMax
	opCheck
)

var opNames = map[opKind]string{opCommit: "commit", opRollback: "rollback", opDiscard: "discard", opCheck: "check"}

func parseOpKind(s string) (opKind, bool) {
	for k, n := range opNames {
		if n == s {
			return k, true
		}
	}
	return 0, false
}

// resolves reports whether the op closes the transaction.
func (k opKind) resolves() bool { return k != opCheck }

// outcome is the resolution an op stands for.
func (k opKind) outcome() Resolution {
	if k == opCommit {
		return Commit
	}
	return Rollback
}

// checkPrepare reports why m cannot be a transactional message.
func checkPrepare(m *store.Message, group string) error {
	switch {
	case m == nil:
		return fmt.Errorf("%w: nil message", ErrInvalid)
	case group == "":
		return fmt.Errorf("%w: empty producer group", ErrInvalid)
	case m.Topic == "" || m.Topic == HalfTopic || m.Topic == OpTopic || m.Topic == CheckMaxTimeTopic:
		return fmt.Errorf("%w: topic %q", ErrInvalid, m.Topic)
	case m.QueueID < 0:
		return fmt.Errorf("%w: queue %d", ErrInvalid, m.QueueID)
	}
	for _, p := range timed {
		if v, ok := m.Properties[p]; ok && v != "" && v != "0" {
			return fmt.Errorf("%w: property %s=%q", ErrDelayNotSupported, p, v)
		}
	}
	if v, ok := m.Properties[PropCheckImmunityTime]; ok {
		if n, err := strconv.ParseInt(v, 10, 64); err != nil || n < 0 {
			return fmt.Errorf("%w: %s=%q is not a number of seconds", ErrInvalid, PropCheckImmunityTime, v)
		}
	}
	return nil
}

// halfOf returns the half message that stands for m in HalfTopic.
func halfOf(m *store.Message, group string, opFloor int64) *store.Message {
	h := *m
	h.Properties = make(map[string]string, len(m.Properties)+5)
	maps.Copy(h.Properties, m.Properties)
	h.Properties[PropRealTopic] = m.Topic
	h.Properties[PropRealQueue] = strconv.Itoa(m.QueueID)
	h.Properties[PropTransaction] = "true"
	h.Properties[PropProducerGroup] = group
	h.Properties[propOpFloor] = strconv.FormatInt(opFloor, 10)
	h.Topic, h.QueueID = HalfTopic, 0
	h.QueueOffset, h.LogOffset, h.StoredAt = 0, 0, time.Time{}
	return &h
}

// halfInfo is what the Manager keeps of a half read from the log.
type halfInfo struct {
	id       int64
	group    string
	storedAt time.Time
	immunity time.Duration // 0: Options.TransactionTimeout
	opFloor  int64         // -1: unknown
}

// parseHalf reads a half record; ok is false for a record that is not one.
func parseHalf(h *store.Message) (halfInfo, bool) {
	p := h.Properties
	if p[PropRealTopic] == "" || p[PropProducerGroup] == "" {
		return halfInfo{}, false
	}
	if _, err := strconv.Atoi(p[PropRealQueue]); err != nil {
		return halfInfo{}, false
	}
	hi := halfInfo{id: h.QueueOffset, group: p[PropProducerGroup], storedAt: h.StoredAt, opFloor: -1}
	if v, err := strconv.ParseInt(p[propOpFloor], 10, 64); err == nil && v >= 0 {
		hi.opFloor = v
	}
	if v, err := strconv.ParseInt(p[PropCheckImmunityTime], 10, 64); err == nil && v > 0 && v < 1<<31 {
		hi.immunity = time.Duration(v) * time.Second
	}
	return hi, true
}

// restore returns the message the half stands for, on its real topic and
// queue, without the half's bookkeeping properties.
func restore(h *store.Message) *store.Message {
	m := *h
	m.Properties = make(map[string]string, len(h.Properties))
	maps.Copy(m.Properties, h.Properties)
	m.Topic = m.Properties[PropRealTopic]
	m.QueueID, _ = strconv.Atoi(m.Properties[PropRealQueue])
	delete(m.Properties, PropRealTopic)
	delete(m.Properties, PropRealQueue)
	delete(m.Properties, propOpFloor)
	m.QueueOffset, m.LogOffset, m.StoredAt = 0, 0, time.Time{}
	return &m
}

// committed is the real message a commit of half h appends.
func committed(h *store.Message) *store.Message {
	m := restore(h)
	delete(m.Properties, PropTransaction)
	m.Properties[PropPreparedQueueOffset] = strconv.FormatInt(h.QueueOffset, 10)
	return m
}

// opRecord is the op record saying k about transaction id.
func opRecord(id int64, k opKind) *store.Message {
	tag := opTagDone
	if k == opCheck {
		tag = opTagCheck
	}
	return &store.Message{
		Topic: OpTopic, Tags: tag,
		Body:       []byte(strconv.FormatInt(id, 10)),
		Properties: map[string]string{propOp: opNames[k]},
	}
}

// probeRecord is the op record settleUncertain appends: it says nothing
// about any transaction (parseOp does not read it, here or in an older
// version).
func probeRecord() *store.Message {
	return &store.Message{Topic: OpTopic, Tags: opTagProbe, Properties: map[string]string{propOp: "probe"}}
}

// parseOp reads an op record; ok is false for a record that is not one.
func parseOp(m *store.Message) (id int64, k opKind, ok bool) {
	k, ok = parseOpKind(m.Properties[propOp])
	if !ok {
		return 0, 0, false
	}
	id, err := strconv.ParseInt(string(m.Body), 10, 64)
	if err != nil || id < 0 {
		return 0, 0, false
	}
	return id, k, true
}

// discarded is the copy of half h kept in CheckMaxTimeTopic.
func discarded(h *store.Message) *store.Message {
	m := *h
	m.Properties = make(map[string]string, len(h.Properties)+1)
	maps.Copy(m.Properties, h.Properties)
	m.Properties[PropPreparedQueueOffset] = strconv.FormatInt(h.QueueOffset, 10)
	m.Topic, m.QueueID = CheckMaxTimeTopic, 0
	m.QueueOffset, m.LogOffset, m.StoredAt = 0, 0, time.Time{}
	return &m
}
