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
//   - The table is linearizable, with its clock: every decision on a key —
//     lock, renewal, refusal, unlock, Holder, Sweep — is made in that key's
//     critical step (one hash bucket of an xsync.MapOf, never a table-wide
//     mutex), with Options.Now read inside it. A caller stalled before that
//     step cannot decide on a time others have moved past. A porcupine
//     check of random concurrent histories on a moving fake clock keeps it
//     so (linearizable_test.go).
//   - Every expiry decision reads Options.Now, so tests move a fake clock.
//   - Bad input (empty group or client ID, negative queue ID) changes
//     nothing, is counted in Stats.Invalid and logged at DEBUG (the caller
//     sees it): TryLock and Unlock return false, TryLockBatch leaves those
//     queues out. NewKeeper and TryHold return ErrInvalid.
//   - Contention (INFO), takeover of an expired lease (WARN), expiry (INFO)
//     and rejected requests (DEBUG) are logged with the keys group, topic,
//     broker, queue, old_client, new_client and token.
//   - Unlock releases the lease the client holds when it runs; UnlockLease
//     releases one lease by its token, so an unlock meant for a lease that
//     expired cannot release the same client's next one.
//
// # Keeper
//
// A Keeper is the client side: Hold locks queues at once and returns the
// ones now held; its goroutine renews them every period; OnLost reports
// queues a renewal found taken (the consumer must stop processing them);
// Close unlocks everything, so a graceful shutdown hands the queues over
// immediately instead of after MaxLiveTime. NewKeeper takes KeeperOptions
// (Every, OnLost, Logger), all in place before its goroutine starts, and
// enforces the 1:3 rule — a period longer than MaxLiveTime/RenewRatio is
// refused with ErrRenewTooSlow — so the two settings cannot drift apart. A Keeper talks
// to a Locker, which *Table satisfies and a host's remote client can too.
//
// # Defaults
//
//   - DefaultMaxLiveTime (60 s) when Options.MaxLiveTime is zero.
//   - RenewRatio (3): a Keeper's period is at most MaxLiveTime/3, and
//     exactly that when KeeperOptions.Every is zero.
//   - Options.Now nil means time.Now; Options.Logger nil discards.
//
// # Caveats
//
// Slices returned by TryLockBatch, Hold, TryHold and Held are new and owned
// by the caller; slices passed in are not retained. OnEvent and OnLost run
// synchronously (OnEvent outside the table's locks) and must be quick;
// OnLost must not call Close. Table.Close refuses every later lock and
// unlock (brokercore.Broker.Close calls it). Leases are in memory only: a restarted table
// starts empty and, unless Options.TokenBase is set above the last token
// issued, counts tokens from 1 again. A lease is only as good as the clocks: a
// holder must stop processing once it cannot renew within MaxLiveTime.
package lock
