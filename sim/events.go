package sim

import "time"

// Event kinds, in the order events at the same instant run: the agents'
// sample first (it sees the state up to that instant), their heartbeat (it
// carries the latest sample), then logoffs and disconnects (they free
// room), reconnects, and new arrivals last.
//
// With a scaling plan, a host that finished starting is ready before the
// logons that waited for it arrive again, and the autoscaler evaluates
// last, seeing everything up to that instant.
const (
	evSample uint8 = iota
	evHeartbeat
	evHostReady
	evEnd
	evDisconnect
	evReconnect
	evArrive
	evAutoscale
)

// event is one thing that happens at a simulated time. user indexes the
// workload (the host, for evHostReady); for evDisconnect and evReconnect,
// away says which period.
type event struct {
	at   time.Duration
	seq  uint64 // insertion order: ties break the same way every run
	user int32
	kind uint8
	away uint8
}

func (a *event) before(b *event) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	if a.kind != b.kind {
		return a.kind < b.kind
	}
	return a.seq < b.seq
}

// eventQueue is a binary min-heap of events by (at, kind, seq). Hand-written
// rather than container/heap: it is the inner loop, and it avoids boxing.
type eventQueue struct {
	items []event
	seq   uint64
}

func (q *eventQueue) len() int { return len(q.items) }

func (q *eventQueue) push(e event) {
	q.seq++
	e.seq = q.seq
	q.items = append(q.items, e)
	i := len(q.items) - 1
	for i > 0 {
		parent := (i - 1) / 2
		if !q.items[i].before(&q.items[parent]) {
			break
		}
		q.items[i], q.items[parent] = q.items[parent], q.items[i]
		i = parent
	}
}

func (q *eventQueue) pop() event {
	top := q.items[0]
	last := len(q.items) - 1
	q.items[0] = q.items[last]
	q.items = q.items[:last]
	i := 0
	for {
		l, r, small := 2*i+1, 2*i+2, i
		if l < last && q.items[l].before(&q.items[small]) {
			small = l
		}
		if r < last && q.items[r].before(&q.items[small]) {
			small = r
		}
		if small == i {
			return top
		}
		q.items[i], q.items[small] = q.items[small], q.items[i]
		i = small
	}
}
