package pop

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/puzpuzpuz/xsync/v3"

	"github.com/brokercore/brokercore/store"
)

// Source is the log pop reads from. *store.Store satisfies it.
//
// Ownership: the messages Read returns are handed to the caller of Pop;
// the Service keeps no reference to them (a redelivery reads again).
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
	Max                    int           // 1..MaxBatch; 0 means 1
	Invisible              time.Duration // popped messages stay hidden this long unless acked or changed; 0 means DefaultInvisible
	Poll                   time.Duration // long-polling wait when nothing is ready; 0 = answer at once
	FIFO                   bool
	AttemptID              string // FIFO only: the same id re-pops the same in-flight batch
	// Filter is a tag expression (ParseFilter): "" or "*" = every message;
	// "A || B" = messages whose Tags is A or B. A message it rejects is settled for
	// the group without being delivered (Stats.Filtered). It is the
	// group's subscription on the topic: a pop with a different filter
	// replaces it, and what the old one skipped is never delivered.
	// Request.Filter takes the plain spelling only (see PlainFilter); a
	// front-end that must take every spelling Apache RocketMQ accepts
	// parses it with ParseFilter and sets TagFilter instead.
	Filter string
	// TagFilter, when not nil, is the group's filter, parsed by the caller
	// (ParseFilter), and Filter must be "". It is how a protocol server
	// hands pop an expression in any spelling its clients may send.
	TagFilter *Filter
}

// Delivery is one popped message.
type Delivery struct {
	// Message is as the Source's Read returned it; the Service keeps no
	// reference to it.
	Message  *store.Message
	Handle   string // receipt handle: opaque, tamper-evident
	Attempts int    // 1 on first delivery
}

// Result is the answer of a Pop. An answer with no message is the zero
// Result.
type Result struct {
	Messages []Delivery
	// Invisible is the invisible time actually applied to Messages:
	// Request.Invisible (or DefaultInvisible for 0) clamped into
	// [Options.MinInvisible, Options.MaxInvisible].
	Invisible time.Duration
	// Clamped reports that Invisible differs from the requested time
	// (DefaultInvisible for a zero Request.Invisible).
	Clamped bool
}

type gtKey struct{ group, topic string }

// groupTopic is the state of one group@topic: the serialization lock, the
// deterministic core and the long-polling waiters. mu guards lock, core
// and lockFree; it is never held across a Source read of messages, an
// Offsets commit, a DeadLetter call or a wait, but the core's plan reads
// the Source's bounds and the Offsets (Committed, Epoch) under it, so
// Arrived, which a store calls from its appenders, takes no mu: notify is
// swapped and closed without it (broadcast). commitMu serializes the group@topic's commits so that they reach
// Offsets in order; it is taken before mu, never waited for while
// holding it (an Ack may TryLock it under mu).
type groupTopic struct {
	key      gtKey
	tag      gtTag                     // of its receipt handles
	names    string                    // their group and topic, encoded (handleNames)
	ackFirst atomic.Pointer[firstStep] // the MAC's first step of the last handle acked
	mu       sync.Mutex
	commitMu sync.Mutex
	lock     topicLock
	core     *core
	view     gtView
	list     atomic.Pointer[[]int]         // cached Source.Queues for AllQueues; nil = list again
	notify   atomic.Pointer[chan struct{}] // closed by broadcast; nil while nobody waits
	lockFree chan struct{}                 // closed by broadcastLockFreeLocked
	lockWake map[*lockWaiter]chan struct{} // a queued FIFO retry sleeps on its channel
	// holderDone is the ctx.Done of the lock holder's request (holderTok):
	// once it is closed the sweep marks the hold abandoned.
	holderDone <-chan struct{}
	holderTok  uint64
	waiters    atomic.Int64
	events     atomic.Uint64 // bumped by every wake-up source except lock release
}

// gtView is the core's view of the Source and the Offsets for one
// group@topic.
type gtView struct {
	src          Source
	offsets      Offsets
	group, topic string
}

func (v gtView) MinOffset(q int) int64 { return v.src.MinOffset(v.topic, q) }
func (v gtView) MaxOffset(q int) int64 { return v.src.MaxOffset(v.topic, q) }
func (v gtView) Epoch(q int) uint64    { return v.offsets.Epoch(v.group, v.topic, q) }
func (v gtView) Committed(q int) (int64, bool) {
	return v.offsets.Committed(v.group, v.topic, q)
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
	coreCfg coreConfig
	// commitLocked: offsets is a *MemoryOffsets, whose commits are short
	// in-memory steps made under gt.mu (ack.go).
	commitLocked bool

	gts      *xsync.MapOf[gtKey, *groupTopic]
	recent   [64]atomic.Pointer[groupTopic] // the group@topics of recent acks, by hash of their names
	seed     maphash.Seed
	topicsMu sync.RWMutex
	topics   map[string][]*groupTopic

	// issued are the handle batches of the last pops (issued.go).
	issued     [issuedRing]atomic.Pointer[issuedBatch]
	issuedNext atomic.Uint32

	waiters atomic.Int64
	closed  atomic.Bool
	done    chan struct{}
	srcDone doner  // the Source, if it has a Done channel
	unsub   func() // cancels the Source subscription; nil if none
	wg      sync.WaitGroup
	st      counters
}

// Optional capabilities of a Source, found by type assertion in New.
type (
	// subscriber is a Source that calls fn for every append (as
	// (*store.Store).Subscribe): New registers Arrived through it, so no
	// host wiring is needed, and Close cancels it.
	subscriber interface {
		Subscribe(fn func(topic string, queueID int, next int64)) (cancel func())
	}
	// doner is a Source whose Done channel is closed when it closes (as
	// (*store.Store).Done): every later call of the Service answers
	// ErrClosed, and long polls end.
	doner interface{ Done() <-chan struct{} }
)

// New returns a Service over src and starts its wake-up loop; Close stops
// it. If src can Subscribe (as *store.Store), New subscribes Arrived to it,
// so arrivals wake long polls without any wiring by the host; if src has
// a Done channel (as *store.Store), the Service answers ErrClosed once it
// is closed.
func New(src Source, opts Options) *Service {
	opts = opts.withDefaults()
	var nb [8]byte
	_, _ = rand.Read(nb[:])
	cfg := coreConfig{initial: opts.InitialOffset, dlRetry: int64(opts.DeadLetterRetry)}
	if opts.DeadLetter != nil {
		cfg.dlAt = int32(min(opts.MaxAttempts, math.MaxInt32))
	}
	s := &Service{
		coreCfg: cfg,
		src:     src,
		opts:    opts,
		offsets: opts.Offsets,
		log:     opts.Logger,
		signer:  newSigner(opts.HandleKey),
		nonce:   binary.BigEndian.Uint64(nb[:]),
		gts:     xsync.NewMapOf[gtKey, *groupTopic](),
		seed:    maphash.MakeSeed(),
		topics:  make(map[string][]*groupTopic),
		done:    make(chan struct{}),
	}
	_, s.commitLocked = opts.Offsets.(*MemoryOffsets)
	if d, ok := src.(doner); ok {
		s.srcDone = d
	}
	if sub, ok := src.(subscriber); ok {
		s.unsub = sub.Subscribe(func(topic string, queueID int, _ int64) { s.Arrived(topic, queueID) })
	}
	s.wg.Add(1)
	go s.loop()
	return s
}

// Close wakes every waiter (their Pop returns ErrClosed), stops the
// background loop and waits for it. It is idempotent.
func (s *Service) Close() error {
	if s.closed.CompareAndSwap(false, true) {
		if s.unsub != nil {
			s.unsub()
		}
		close(s.done)
	}
	s.wg.Wait()
	return nil
}

// isClosed reports whether the Service or its Source was closed.
func (s *Service) isClosed() bool { return s.closed.Load() || isDone(s.sourceDone()) }

func isDone(ch <-chan struct{}) bool {
	if ch == nil {
		return false
	}
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// sourceDone is the Source's Done channel (nil, never ready, if it has
// none). It is asked at every use, so a Source that swaps what it wraps
// answers for the current one.
func (s *Service) sourceDone() <-chan struct{} {
	if s.srcDone == nil {
		return nil
	}
	return s.srcDone.Done()
}

// closedErr is the ErrClosed of op, saying which side closed.
func (s *Service) closedErr(op string) error {
	if s.closed.Load() {
		return fmt.Errorf("%s: %w", op, ErrClosed)
	}
	return fmt.Errorf("%s: source closed: %w", op, ErrClosed)
}

func (s *Service) nowNanos() int64 { return s.opts.Now().UnixNano() }

func (s *Service) groupTopic(group, topic string) *groupTopic {
	k := gtKey{group, topic}
	if gt, ok := s.gts.Load(k); ok {
		return gt
	}
	gt, loaded := s.gts.LoadOrCompute(k, func() *groupTopic {
		return &groupTopic{key: k, tag: s.signer.tag(group, topic), names: handleNames(group, topic), core: newCore(group, topic, s.coreCfg, s.log, &s.st),
			view: gtView{src: s.src, offsets: s.offsets, group: group, topic: topic}}
	})
	if !loaded {
		s.topicsMu.Lock()
		s.topics[topic] = append(s.topics[topic], gt)
		s.topicsMu.Unlock()
	}
	return gt
}

// validate checks req, applies the zero-value defaults (Max 0 → 1) and
// parses its filter.
func (s *Service) validate(req *Request) (Filter, error) {
	bad := func(why string) (Filter, error) {
		return Filter{}, fmt.Errorf("pop group %q topic %q client %q queue %d: %s: %w",
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
	case req.Max < 0 || req.Max > MaxBatch:
		return bad(fmt.Sprintf("max %d outside 1..%d (0 means 1)", req.Max, MaxBatch))
	case req.Invisible < 0:
		return bad("negative invisible time")
	case req.Poll < 0:
		return bad("negative poll time")
	case req.QueueID < AllQueues:
		return bad("queue id below AllQueues")
	}
	f, err := requestFilter(req)
	if err != nil {
		return Filter{}, fmt.Errorf("pop group %q topic %q client %q queue %d: %w",
			req.Group, req.Topic, req.ClientID, req.QueueID, err)
	}
	if req.Max == 0 {
		req.Max = 1
	}
	return f, nil
}

// invisible is the invisible time of a pop: 0 means DefaultInvisible, then
// clamped into [MinInvisible, MaxInvisible].
func (s *Service) invisible(d time.Duration) (time.Duration, bool) {
	if d == 0 {
		d = DefaultInvisible
	}
	return s.clamp(d)
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

// deliveries turns picks into Deliveries. The handles of one pop are
// encoded into one buffer and made one string, which each handle slices:
// one allocation for all of them.
func (s *Service) deliveries(gt *groupTopic, picks []pick) []Delivery {
	out := make([]Delivery, len(picks))
	var buf [MaxBatch * 96]byte
	b := buf[:0]
	ends := make([]int, 0, MaxBatch)
	var first [16]byte // the MAC's first step, the same for all of one queue state's handles
	var firstOf *queueState
	x := macBlocks.Get().(*[16]byte)
	defer macBlocks.Put(x)
	ib := &issuedBatch{gt: gt}
	for _, p := range picks {
		h := handle{nonce: s.nonce, inc: p.qs.inc, queue: p.qs.queue, offset: p.off, gen: p.gen}
		if p.qs != firstOf {
			first, firstOf = s.signer.macFirst(&h, gt.tag), p.qs
		}
		b = s.signer.appendHandle(b, h, first, gt.names, x)
		ends = append(ends, len(b))
		ib.add(&h, len(b))
	}
	all := string(b)
	if ib.all = all; ib.n == len(picks) {
		s.publish(ib)
	}
	start := 0
	for i, p := range picks {
		out[i] = Delivery{Message: p.msg, Attempts: int(p.att), Handle: all[start:ends[i]]}
		start = ends[i]
	}
	return out
}
