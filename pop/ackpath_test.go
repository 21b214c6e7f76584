package pop

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// An ack of a live handle allocates nothing: the handle is decoded on the
// stack, its group@topic found without making strings, the MAC encrypted
// in a pooled block, and the commit of MemoryOffsets allocates nothing
// (issue 15, the cost per message; it was 3 allocations).
func TestAckOfALiveHandleDoesNotAllocate(t *testing.T) {
	src := newMemSource()
	src.append("T", 0, 400)
	s := New(src, Options{})
	defer s.Close()
	var handles []string
	for len(handles) < 400 {
		r, err := s.Pop(context.Background(), Request{Group: "g", Topic: "T", ClientID: "c", Max: MaxBatch, Invisible: time.Minute})
		require.NoError(t, err)
		require.NotEmpty(t, r.Messages)
		for _, d := range r.Messages {
			handles = append(handles, d.Handle)
		}
	}
	i := 0
	allocs := testing.AllocsPerRun(len(handles)-1, func() {
		if err := s.Ack(handles[i]); err != nil {
			t.Fatal(err)
		}
		i++
	})
	require.Zero(t, allocs)
	require.Equal(t, uint64(400), s.Stats().Acks)
}

// Acks find their group@topic through a 64-slot cache keyed by a hash of
// its names: with 200 group@topics the slots collide and are overwritten,
// and every ack must still land on its own group@topic — and a handle
// whose names were swapped for another known group@topic's must fail its
// MAC, cached or not.
func TestAcksOfManyGroupTopicsEachFindTheirOwn(t *testing.T) {
	src := newMemSource()
	src.append("T", 0, 2)
	src.append("U", 0, 2)
	s := New(src, Options{})
	defer s.Close()
	type held struct{ group, topic, handle string }
	var all []held
	for i := range 100 {
		for _, topic := range []string{"T", "U"} {
			g := fmt.Sprintf("g%d", i)
			r, err := s.Pop(context.Background(), Request{Group: g, Topic: topic, ClientID: "c", Max: 2, Invisible: time.Minute})
			require.NoError(t, err)
			require.Len(t, r.Messages, 2)
			for _, d := range r.Messages {
				all = append(all, held{g, topic, d.Handle})
			}
		}
	}
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	for _, h := range all[:len(all)/2] {
		require.NoError(t, s.Ack(h.handle), "%s@%s", h.group, h.topic)
	}
	// Swap the names of a live handle for another group's (same length):
	// the MAC binds them.
	for _, h := range all[len(all)/2:][:20] {
		raw, err := base64.RawURLEncoding.DecodeString(h.handle)
		require.NoError(t, err)
		other := "g99"
		if h.group == other {
			other = "g98"
		}
		forged := bytes.Replace(raw, []byte(h.group), []byte(other), 1)
		if len(h.group) != len(other) {
			continue
		}
		require.ErrorIs(t, s.Ack(base64.RawURLEncoding.EncodeToString(forged)), ErrBadHandle)
	}
	for _, h := range all[len(all)/2:] {
		require.NoError(t, s.Ack(h.handle), "%s@%s", h.group, h.topic)
	}
	for _, h := range all {
		require.ErrorIs(t, s.Ack(h.handle), ErrStaleHandle, "acked twice")
	}
	require.Equal(t, uint64(len(all)), s.Stats().Acks)
}
