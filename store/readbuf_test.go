package store

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Reads reuse scratch buffers (readBuf): nothing they return may point
// into one. A caller that keeps and scribbles over what one read returned
// must not change what any other read returns, and the bodies of one read
// must not overlap (appending to one never overwrites the next).
func TestReadResultsAreOwnedAcrossReusedScratchBuffers(t *testing.T) {
	s := openT(t, t.TempDir(), Options{Sync: SyncNone})
	defer s.Close()
	var batch []*Message
	for i := range 200 {
		batch = append(batch, msg("t", i%2, fmt.Sprintf("body-%03d-%s", i, string(make([]byte, i%7)))))
	}
	require.NoError(t, s.Append(batch...))
	want := func(q int, off int64) string {
		i := int(off)*2 + q
		return fmt.Sprintf("body-%03d-%s", i, string(make([]byte, i%7)))
	}
	first, err := s.Read("t", 0, 0, 32)
	require.NoError(t, err)
	require.Len(t, first, 32)
	for _, m := range first {
		_ = append(m.Body[:len(m.Body):len(m.Body)], 'X') // a full slice: must reallocate, not write the next body
		for i := range m.Body {
			m.Body[i] = '#'
		}
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range 50 {
				q, off := (g+r)%2, int64(r%60)
				got, err := s.Read("t", q, off, 32)
				if !assert.NoError(t, err) {
					return
				}
				for k, m := range got {
					assert.Equal(t, want(q, off+int64(k)), string(m.Body))
				}
				m, err := s.ReadAt(got[0].LogOffset)
				if assert.NoError(t, err) {
					assert.Equal(t, want(q, off), string(m.Body))
				}
			}
		}()
	}
	wg.Wait()
	again, err := s.Read("t", 0, 0, 32)
	require.NoError(t, err)
	for k, m := range again {
		assert.Equal(t, want(0, int64(k)), string(m.Body), "a caller's writes to an earlier result leak into this one")
		assert.Equal(t, cap(m.Body), len(m.Body), "a body's capacity reaches into its neighbour")
	}
	for _, m := range first {
		assert.Equal(t, len(m.Body), countByte(m.Body, '#'), "a later read overwrote an earlier result")
	}
}

func countByte(b []byte, c byte) int {
	n := 0
	for _, x := range b {
		if x == c {
			n++
		}
	}
	return n
}
