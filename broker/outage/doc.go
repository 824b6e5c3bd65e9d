// Package outage is what the broker does about its store being away
// (R-OUT1..R-OUT5): it knows, it bounds, it falls back.
//
//   - Health knows whether the store answers: a failed call is confirmed
//     with two pings, an outage starts a prober, its end runs the recovery
//     hooks (R-OUT1). Guard wraps the store so that every call is bounded
//     by the store timeout and answers StoreUnavailable during an outage.
//   - Mode is the fallback while the store is down: Connect answers a
//     known user's reconnect from memory and places a new user within this
//     replica's escrow (outage placement, R-OUT2, R-OUT3, using
//     placement.TakesNewSession like every placement); heartbeats are held
//     (HoldHeartbeat) and the users they report remembered, to be written
//     and judged when the store is back.
//   - The escrow: while the store is up, each replica with
//     --outage-placement holds a share of each host's free slots, which
//     every replica's view counts as taken (HeldByOthers, Unwritten).
//
// The broker's connect path calls Mode.Connect once, when it finds the
// store down before it decided anything.
package outage
