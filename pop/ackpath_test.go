package pop

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
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
	handles := popHandles(t, s, 400)
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

// The MAC's first step is cached per group@topic for the last queue state
// acked: acks alternating between queue states (cache misses) and a
// tampered offset under a cached state (cache hit) are both judged right.
func TestAckMACCacheAcrossQueueStates(t *testing.T) {
	src := newMemSource()
	src.append("T", 0, 8)
	src.append("T", 1, 8)
	s := New(src, Options{})
	defer s.Close()
	var q0, q1 []string
	for q, into := range map[int]*[]string{0: &q0, 1: &q1} {
		r, err := s.Pop(context.Background(), Request{Group: "g", Topic: "T", ClientID: "c", QueueID: q, Max: 8, Invisible: time.Minute})
		require.NoError(t, err)
		require.Len(t, r.Messages, 8)
		for _, d := range r.Messages {
			*into = append(*into, d.Handle)
		}
	}
	for i := range 4 { // alternate: every ack misses the cache
		require.NoError(t, s.Ack(q0[i]))
		require.NoError(t, s.Ack(q1[i]))
	}
	require.NoError(t, s.Ack(q0[4])) // the cache now holds queue 0's state
	h, mac, err := parseHandle(q0[5])
	require.NoError(t, err)
	require.Equal(t, q0[5], base64.RawURLEncoding.EncodeToString(append(encodeBody(h), mac[:]...)), "encodeBody re-encodes a handle")
	h.offset = 7 // another live offset of the same state, with queue 0's MAC for offset 5
	forged := base64.RawURLEncoding.EncodeToString(append(encodeBody(h), mac[:]...))
	require.ErrorIs(t, s.Ack(forged), ErrBadHandle)
	for i := 5; i < 8; i++ {
		require.NoError(t, s.Ack(q0[i]))
		require.NoError(t, s.Ack(q1[i-1]))
	}
	require.NoError(t, s.Ack(q1[7]))
	require.Equal(t, uint64(16), s.Stats().Acks)
}

// encodeBody is a handle's body as appendHandle writes it, without MAC.
func encodeBody(h handle) []byte {
	b := []byte{handleVersion}
	b = binary.BigEndian.AppendUint64(b, h.nonce)
	b = binary.AppendUvarint(b, h.inc)
	b = binary.AppendUvarint(b, uint64(h.queue))
	b = binary.AppendUvarint(b, uint64(h.offset))
	b = binary.AppendUvarint(b, uint64(h.gen))
	return append(b, handleNames(h.group, h.topic)...)
}

// closingOffsets is a host closing down while an ack commits: the Service
// is closed and then its Offsets (as brokercore.Broker.Close does), so the
// commit fails with the Offsets' own "closed" error.
type closingOffsets struct {
	*MemoryOffsets
	svc *Service
}

func (c *closingOffsets) CommitFenced(group, topic string, q int, off int64, epoch uint64) error {
	c.svc.Close()
	return errors.New("offset: manager closed")
}

// An ack whose commit fails because the host is closing (Service closed
// first, then its Offsets) answers ErrClosed, as every call after Close
// does, not the Offsets' error (found by TestAuditBrokerCloseUnderLoad in
// the root package, which failed about one run in six).
func TestAckRacingCloseAnswersErrClosed(t *testing.T) {
	src := newMemSource()
	src.append("T", 0, 2)
	offs := &closingOffsets{MemoryOffsets: NewMemoryOffsets()}
	s := New(src, Options{Offsets: offs})
	offs.svc = s
	defer s.Close()
	r, err := s.Pop(context.Background(), Request{Group: "g", Topic: "T", ClientID: "c", Max: 2, Invisible: time.Minute})
	require.NoError(t, err)
	require.Len(t, r.Messages, 2)
	err = s.Ack(r.Messages[0].Handle)
	require.ErrorIs(t, err, ErrClosed)
	require.ErrorIs(t, s.Ack(r.Messages[1].Handle), ErrClosed)
}
