// Package poolview is the broker's in-memory view of each host pool: a
// placement.Placer per pool, read from the store on first use and kept
// current by this server's own changes (connects, host edits,
// heartbeats), read again when it may be stale (the maintenance tick, a
// NoCapacity, a lost commit race). The database stays the authority
// (R-D3): a view only proposes, and the store's commit decides.
//
// # Landing protocol
//
// A connect reserves a host in the view when it decides (View.Decide: the
// host's count is up before the next decision) and commits outside the
// view's lock. The store numbers every write it commits (Seq). The
// reservation lands when the store commits the session
// (PlacementCommit.OnCommitted calls View.Land with the commit's seq), or
// is released when the commit fails. A heartbeat's result carries the
// host's counts as of its seq: the view adds the placements landed after
// it (they are not in its counts) and drops the older results it gets
// late. A read of a host from the store is applied with the landed mark
// taken before it began (LandedMark), so the placements it includes are
// not counted twice.
//
// Land never waits for the view's lock (the store calls it on its single
// committer, before any write of the same batch is answered): it queues
// the landing, and whoever takes the lock next applies the queue first.
package poolview
