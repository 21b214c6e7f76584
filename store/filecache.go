package store

import (
	"container/list"
	"os"
	"sync"

	"github.com/brokercore/brokercore/internal/fsx"
)

// fileCache keeps at most max index files open (Options.MaxOpenFiles),
// whatever the number of queues: an index file is opened when it is used
// and the least recently used unused one is closed to make room. A file in
// use (acquired and not yet released) is never closed, so more files than
// max are open only while more than max are in use at once (each by a
// caller holding the store lock).
type fileCache struct {
	fs  fsx.FS
	max int

	mu    sync.Mutex
	open  int
	lru   list.List // of *indexFile, most recent first
	opens uint64    // files opened, for Stats
}

func newFileCache(fs fsx.FS, max int) *fileCache {
	return &fileCache{fs: fs, max: max}
}

// acquire returns x's file, opening it (and closing the least recently used
// unused ones) if needed; release it after use.
func (c *fileCache) acquire(x *indexFile) (fsx.File, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if x.f == nil {
		c.evict(c.max - 1)
		f, err := c.fs.OpenFile(x.path, os.O_RDWR|os.O_CREATE, 0o640)
		if err != nil {
			return nil, err
		}
		x.f, x.elem = f, c.lru.PushFront(x)
		c.open++
		c.opens++
	} else {
		c.lru.MoveToFront(x.elem)
	}
	x.refs++
	return x.f, nil
}

// release ends a use of x's file.
func (c *fileCache) release(x *indexFile) {
	c.mu.Lock()
	x.refs--
	if c.open > c.max {
		c.evict(c.max)
	}
	c.mu.Unlock()
}

// evict closes unused files, least recently used first, until at most keep
// are open. Callers hold c.mu.
func (c *fileCache) evict(keep int) {
	for e := c.lru.Back(); e != nil && c.open > keep; {
		prev := e.Prev()
		if x := e.Value.(*indexFile); x.refs == 0 {
			c.closeLocked(x)
		}
		e = prev
	}
}

func (c *fileCache) closeLocked(x *indexFile) {
	if x.f == nil {
		return
	}
	x.f.Close()
	c.lru.Remove(x.elem)
	x.f, x.elem = nil, nil
	c.open--
}

// closeAll closes every file (before a rebuild, at Close).
func (c *fileCache) closeAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for e := c.lru.Front(); e != nil; {
		next := e.Next()
		x := e.Value.(*indexFile)
		x.refs = 0
		c.closeLocked(x)
		e = next
	}
}

// stats returns the files open now and opened so far.
func (c *fileCache) stats() (open int, opens uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.open, c.opens
}
