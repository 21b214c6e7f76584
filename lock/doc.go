// Package lock is a lease lock table for queue ownership, with fencing
// tokens, and a client-side Keeper that holds a set of queues.
//
// # Model
//
// A Table maps (group, Queue) to a Lease: a client ID, a fencing Token and
// an expiry. Groups are independent. TryLock by a client with no live lease
// on the key takes it with a new token; TryLock by the holder before expiry
// renews it (same token, Expires moved to now+MaxLiveTime); any other
// client is refused until the lease expires. An expired lease is gone:
// whoever locks next, even the former holder, gets a new token. Unlock and
// UnlockAll free leases at once; Sweep drops expired entries to reclaim
// memory (expired leases are already free for TryLock without it).
//
// # Guarantees
//
//   - At most one live lease per (group, queue) at any instant of the
//     table's clock.
//   - Token is strictly increasing per (group, queue) every time ownership
//     changes hands — after an unlock, an expiry or a Sweep too. Tokens come
//     from one table-wide counter, so they are never reused; a storage layer
//     can refuse writes carrying a token older than the newest it has seen.
//   - Renewal and reads never take a table-wide mutex: the table is an
//     xsync.MapOf, reads are lock-free, and writes lock one hash bucket.
//     Refusals under contention are answered from a lock-free read.
//   - Every expiry decision reads Options.Now, so tests move a fake clock.
//   - Bad input (empty group or client ID, negative queue ID) changes
//     nothing, is counted in Stats.Invalid and logged: TryLock and Unlock
//     return false, TryLockBatch leaves those queues out. NewKeeper and
//     TryHold return ErrInvalid.
//   - Contention, takeover of an expired lease, expiry and rejected
//     requests are logged with group, queue, old and new client.
//
// # Keeper
//
// A Keeper is the client side: Hold locks queues at once and returns the
// ones now held; its goroutine renews them every period; OnLost reports
// queues a renewal found taken (the consumer must stop processing them);
// Close unlocks everything, so a graceful shutdown hands the queues over
// immediately instead of after MaxLiveTime. NewKeeper enforces the 1:3 rule
// — a period longer than MaxLiveTime/RenewRatio is refused with
// ErrRenewTooSlow — so the two settings cannot drift apart. A Keeper talks
// to a Locker, which *Table satisfies and a host's remote client can too.
//
// # Defaults
//
//   - DefaultMaxLiveTime (60 s) when Options.MaxLiveTime is zero.
//   - RenewRatio (3): a Keeper's period is at most MaxLiveTime/3.
//   - Options.Now nil means time.Now; Options.Logger nil discards.
//
// # Caveats
//
// Slices returned by TryLockBatch, Hold, TryHold and Held are new and owned
// by the caller; slices passed in are not retained. OnEvent and OnLost run
// synchronously (OnEvent outside the table's locks) and must be quick;
// OnLost must not call Close. Leases are in memory only: a restarted table
// starts empty and, unless Options.TokenBase is set above the last token
// issued, counts tokens from 1 again. A lease is only as good as the clocks: a
// holder must stop processing once it cannot renew within MaxLiveTime.
package lock
