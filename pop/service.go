package pop

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/puzpuzpuz/xsync/v3"

	"github.com/brokercore/brokercore/store"
)

// Source is the log pop reads from. *store.Store satisfies it.
//
// Ownership: the messages Read returns become the Service's; it keeps them
// while they are in flight and hands the same pointers to every delivery.
type Source interface {
	Read(topic string, queueID int, offset int64, max int) ([]*store.Message, error)
	MinOffset(topic string, queueID int) int64
	MaxOffset(topic string, queueID int) int64
	Queues(topic string) []int
}

// AllQueues as Request.QueueID pops from every queue of the topic, starting
// at a different queue on every pop so that no queue starves.
const AllQueues = -1

// MaxBatch is the largest Request.Max.
const MaxBatch = 32

// Request is one pop.
type Request struct {
	Group, Topic, ClientID string
	QueueID                int           // or AllQueues: rotate over every queue of the topic
	Max                    int           // 1..MaxBatch
	Invisible              time.Duration // popped messages stay hidden this long unless acked or changed
	Poll                   time.Duration // long-polling wait when nothing is ready; 0 = answer at once
	FIFO                   bool
	AttemptID              string // FIFO only: the same id re-pops the same in-flight batch
}

// Delivery is one popped message.
type Delivery struct {
	// Message is shared with the Service's in-flight table (and with later
	// deliveries of the same message): treat it as read-only.
	Message  *store.Message
	Handle   string // receipt handle: opaque, tamper-evident
	Attempts int    // 1 on first delivery
}

// Result is the answer of a Pop. An answer with no message is the zero
// Result.
type Result struct {
	Messages []Delivery
	// Invisible is the invisible time actually applied to Messages:
	// Request.Invisible clamped into [Options.MinInvisible,
	// Options.MaxInvisible] (zero when there are no Messages).
	Invisible time.Duration
	// Clamped reports that Invisible differs from Request.Invisible.
	Clamped bool
}

type gtKey struct{ group, topic string }

// groupTopic is the state of one group@topic: the serialization lock, the
// per-queue states and the long-polling waiters. mu guards everything but
// the atomics; it is only ever held for short in-memory steps — never
// across a Source read, a DeadLetter call or a wait.
type groupTopic struct {
	key      gtKey
	mu       sync.Mutex
	lock     topicLock
	queues   map[int]*queueState
	rr       int
	notify   chan struct{} // closed by broadcastLocked; nil while nobody waits
	lockFree chan struct{} // closed by broadcastLockFreeLocked
	waiters  atomic.Int64
	events   atomic.Uint64 // bumped by every wake-up source except lock release
}

// Service pops, acks and changes the invisible time of messages of a
// Source for any number of consumer groups. It is safe for concurrent use.
type Service struct {
	src     Source
	opts    Options
	offsets Offsets
	log     *slog.Logger
	signer  *signer
	nonce   uint64

	gts      *xsync.MapOf[gtKey, *groupTopic]
	topicsMu sync.RWMutex
	topics   map[string][]*groupTopic

	incSeq   atomic.Uint64
	batchSeq atomic.Uint64
	waiters  atomic.Int64
	closed   atomic.Bool
	done     chan struct{}
	wg       sync.WaitGroup
	st       counters

	// failFastFIFO is a test-only switch that restores the broken design of
	// the field report (a contended FIFO retry returns empty at once like a
	// non-FIFO pop); the field report test uses it to show it would fail.
	failFastFIFO bool
}

// New returns a Service over src and starts its wake-up loop; Close stops it.
func New(src Source, opts Options) *Service {
	opts = opts.withDefaults()
	var nb [8]byte
	_, _ = rand.Read(nb[:])
	s := &Service{
		src:     src,
		opts:    opts,
		offsets: opts.Offsets,
		log:     opts.Logger,
		signer:  newSigner(opts.HandleKey),
		nonce:   binary.BigEndian.Uint64(nb[:]),
		gts:     xsync.NewMapOf[gtKey, *groupTopic](),
		topics:  make(map[string][]*groupTopic),
		done:    make(chan struct{}),
	}
	s.wg.Add(1)
	go s.loop()
	return s
}

// Close wakes every waiter (their Pop returns ErrClosed), stops the
// background loop and waits for it. It is idempotent.
func (s *Service) Close() error {
	if s.closed.CompareAndSwap(false, true) {
		close(s.done)
	}
	s.wg.Wait()
	return nil
}

func (s *Service) nowNanos() int64 { return s.opts.Now().UnixNano() }

func (s *Service) groupTopic(group, topic string) *groupTopic {
	k := gtKey{group, topic}
	if gt, ok := s.gts.Load(k); ok {
		return gt
	}
	gt, loaded := s.gts.LoadOrCompute(k, func() *groupTopic {
		return &groupTopic{key: k, queues: make(map[int]*queueState)}
	})
	if !loaded {
		s.topicsMu.Lock()
		s.topics[topic] = append(s.topics[topic], gt)
		s.topicsMu.Unlock()
	}
	return gt
}

func (s *Service) validate(req Request) error {
	bad := func(why string) error {
		return fmt.Errorf("pop group %q topic %q client %q queue %d: %s: %w",
			req.Group, req.Topic, req.ClientID, req.QueueID, why, ErrInvalid)
	}
	switch {
	case req.Group == "":
		return bad("empty group")
	case req.Topic == "":
		return bad("empty topic")
	case req.ClientID == "":
		return bad("empty client id")
	case len(req.Group)+len(req.Topic) > 2048:
		return bad("group and topic longer than 2048 bytes")
	case req.Max < 1 || req.Max > MaxBatch:
		return bad(fmt.Sprintf("max %d outside 1..%d", req.Max, MaxBatch))
	case req.Invisible < 0:
		return bad("negative invisible time")
	case req.Poll < 0:
		return bad("negative poll time")
	case req.QueueID < AllQueues:
		return bad("queue id below AllQueues")
	}
	return nil
}

func (s *Service) clamp(d time.Duration) (time.Duration, bool) {
	switch {
	case d < s.opts.MinInvisible:
		return s.opts.MinInvisible, true
	case d > s.opts.MaxInvisible:
		return s.opts.MaxInvisible, true
	}
	return d, false
}

// stateLocked returns the queue's state, dropping it first if the offset
// epoch changed (a reset): popping then restarts at the committed offset.
func (s *Service) stateLocked(gt *groupTopic, queue int) *queueState {
	g, t := gt.key.group, gt.key.topic
	ep := s.offsets.Epoch(g, t, queue)
	qs := gt.queues[queue]
	if qs != nil && qs.epoch == ep {
		return qs
	}
	start, ok := s.offsets.Committed(g, t, queue)
	if !ok {
		if s.opts.InitialOffset == Latest {
			start = s.src.MaxOffset(t, queue)
			if err := s.offsets.CommitFenced(g, t, queue, start, ep); err != nil {
				s.log.Warn("pop: committing initial latest offset failed", "group", g, "topic", t, "queue", queue, "offset", start, "err", err)
			}
		} else {
			start = s.src.MinOffset(t, queue)
		}
	}
	if min := s.src.MinOffset(t, queue); start < min {
		s.log.Warn("pop: committed offset below the log's min offset, skipping ahead", "group", g, "topic", t, "queue", queue, "committed", start, "min", min)
		start = min
	}
	if qs != nil {
		s.st.resets.Add(1)
		s.log.Info("pop: offset epoch changed, dropping in-memory queue state", "group", g, "topic", t, "queue", queue,
			"old_epoch", qs.epoch, "epoch", ep, "restart_at", start, "dropped_in_flight", qs.pending)
	}
	qs = newQueueState(queue, s.incSeq.Add(1), ep, start)
	gt.queues[queue] = qs
	return qs
}

// commitLocked commits the queue's low-water mark if it moved.
func (s *Service) commitLocked(gt *groupTopic, qs *queueState) {
	low := qs.low()
	if low <= qs.committed {
		return
	}
	if err := s.offsets.CommitFenced(gt.key.group, gt.key.topic, qs.queue, low, qs.epoch); err != nil {
		s.st.commitErrors.Add(1)
		s.log.Warn("pop: commit failed", "group", gt.key.group, "topic", gt.key.topic, "queue", qs.queue, "offset", low, "epoch", qs.epoch, "err", err)
		return
	}
	s.st.commits.Add(1)
	qs.committed = low
}

func (s *Service) deliveries(gt *groupTopic, picks []pick) []Delivery {
	out := make([]Delivery, len(picks))
	for i, p := range picks {
		out[i] = Delivery{
			Message:  p.msg,
			Attempts: int(p.att),
			Handle: s.signer.encode(handle{
				nonce: s.nonce, inc: p.qs.inc, queue: p.qs.queue, offset: p.off, gen: p.gen,
				group: gt.key.group, topic: gt.key.topic,
			}),
		}
	}
	return out
}
