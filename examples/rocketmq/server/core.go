package server

// TEMPORARY: the composition brokercore.Open does, in the same shape, until
// Open lands on main. Only this file changes when it does.

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/brokercore/brokercore/consumer"
	"github.com/brokercore/brokercore/lock"
	"github.com/brokercore/brokercore/offset"
	"github.com/brokercore/brokercore/pop"
	"github.com/brokercore/brokercore/schedule"
	"github.com/brokercore/brokercore/store"
)

// CoreOptions mirror brokercore.Options.
type CoreOptions struct {
	Store    store.Options
	Pop      pop.Options
	Offset   offset.Options
	Schedule schedule.Options
	Lock     lock.Options
	Consumer consumer.Options
	Now      func() time.Time
	Logger   *slog.Logger
	// Sweep is the period of lock sweeps and consumer scans (default 1 s).
	Sweep time.Duration
}

// Core is the composed broker core (brokercore.Broker's shape).
type Core struct {
	st    *store.Store
	pop   *pop.Service
	offs  *offset.Manager
	sched *schedule.Scheduler
	locks *lock.Table
	cons  *consumer.Registry

	stop chan struct{}
	wg   sync.WaitGroup
	once sync.Once
	err  error
}

// DeadLetterPrefix is brokercore.DeadLetterPrefix.
const DeadLetterPrefix = "%DLQ%"

// OpenCore opens the core under dir as brokercore.Open does.
func OpenCore(dir string, o CoreOptions) (*Core, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Sweep <= 0 {
		o.Sweep = time.Second
	}
	fill := func(now *func() time.Time, lg **slog.Logger) {
		if *now == nil {
			*now = o.Now
		}
		if *lg == nil {
			*lg = o.Logger
		}
	}
	fill(&o.Store.Now, &o.Store.Logger)
	fill(&o.Pop.Now, &o.Pop.Logger)
	fill(&o.Offset.Now, &o.Offset.Logger)
	fill(&o.Schedule.Now, &o.Schedule.Logger)
	fill(&o.Lock.Now, &o.Lock.Logger)
	fill(&o.Consumer.Now, &o.Consumer.Logger)

	c := &Core{stop: make(chan struct{})}
	var err error
	if c.st, err = store.Open(filepath.Join(dir, "store"), o.Store); err != nil {
		return nil, err
	}
	if o.Offset.Path == "" {
		o.Offset.Path = filepath.Join(dir, "offsets")
	}
	if c.offs, err = offset.Open(o.Offset); err != nil {
		c.st.Close()
		return nil, err
	}
	if o.Schedule.ProgressPath == "" {
		o.Schedule.ProgressPath = filepath.Join(dir, "schedule", "progress")
	}
	if err := os.MkdirAll(filepath.Dir(o.Schedule.ProgressPath), 0o755); err != nil {
		c.offs.Close()
		c.st.Close()
		return nil, err
	}
	if c.sched, err = schedule.New(c.st, o.Schedule); err != nil {
		c.offs.Close()
		c.st.Close()
		return nil, err
	}
	o.Pop.Offsets = c.offs
	if o.Pop.DeadLetter == nil {
		st := c.st
		o.Pop.DeadLetter = func(group string, m *store.Message) error {
			m.Topic, m.QueueID = DeadLetterPrefix+group, 0
			return st.Append(m)
		}
	}
	c.pop = pop.New(c.st, o.Pop)
	c.locks = lock.New(o.Lock)
	c.cons = consumer.New(o.Consumer)
	if err := c.sched.Start(); err != nil {
		c.pop.Close()
		c.offs.Close()
		c.st.Close()
		return nil, err
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		t := time.NewTicker(o.Sweep)
		defer t.Stop()
		for {
			select {
			case <-c.stop:
				return
			case <-t.C:
				c.locks.Sweep()
				c.cons.Scan()
			}
		}
	}()
	return c, nil
}

func (c *Core) Store() *store.Store            { return c.st }
func (c *Core) Pop() *pop.Service              { return c.pop }
func (c *Core) Offsets() *offset.Manager       { return c.offs }
func (c *Core) Scheduler() *schedule.Scheduler { return c.sched }
func (c *Core) Locks() *lock.Table             { return c.locks }
func (c *Core) Consumers() *consumer.Registry  { return c.cons }

// Close stops everything in reverse order; idempotent.
func (c *Core) Close() error {
	c.once.Do(func() {
		close(c.stop)
		c.wg.Wait()
		errs := []error{c.sched.Stop(), c.pop.Close(), c.offs.Close(), c.st.Close()}
		c.err = errors.Join(errs...)
	})
	return c.err
}
