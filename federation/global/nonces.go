package global

import (
	"context"
	"sync"
	"time"

	"github.com/vdibroker/vdibroker"
)

// The nonces of verified pod-to-pod calls (R-G5), recorded in this pod's
// store so that a replay is refused on every replica. Each record is a
// synced commit, and a global connect makes one on every pod it asks: the
// calls a pod verifies while a commit is under way share the next one
// (group commit), so a pod asked by many connects at once pays one commit
// for all of them, never answering before its nonce is recorded.

// maxNonceBatch bounds the nonces of one commit.
const maxNonceBatch = 256

// nonceReq is one call's nonce waiting for a commit.
type nonceReq struct {
	pod     string // the budget it spends (vdibroker.NonceUse)
	nonce   string
	expires time.Time
	fresh   bool
	err     error
	done    chan struct{}
}

// nonceBatcher queues nonces; the first caller that finds no commit under
// way runs commits until the queue is empty.
type nonceBatcher struct {
	mu      sync.Mutex
	queue   []*nonceReq
	running bool
}

// UseNonce records a verified pod-to-pod call's nonce in this pod's store,
// where every replica sees it (R-G5), spending pod's budget: fresh is
// false for a replay, a budget spent TooManyRequests. Calls at the same
// time share one commit, and one caller past its budget refuses only its
// own calls in it.
func (g *Service) UseNonce(ctx context.Context, pod, nonce string, expires time.Time) (bool, error) {
	r := &nonceReq{pod: pod, nonce: nonce, expires: expires, done: make(chan struct{})}
	b := &g.nonces
	b.mu.Lock()
	b.queue = append(b.queue, r)
	lead := !b.running
	b.running = true
	b.mu.Unlock()
	if lead {
		// Not tied to this caller (the batches are others' too), and
		// not on its goroutine, so no caller waits for more than its
		// own batch.
		// Nor with its audit entry, which the commit would write as
		// its own (vdibroker.WithAudit).
		go g.commitNonces(vdibroker.WithAudit(context.WithoutCancel(ctx), nil))
	}
	select {
	case <-r.done:
		return r.fresh, r.err
	case <-ctx.Done():
		// The call goes unanswered; its nonce may still be recorded,
		// which refuses only a replay of it.
		return false, ctx.Err()
	}
}

// commitNonces commits the queue, batch after batch, until it is empty.
func (g *Service) commitNonces(ctx context.Context) {
	b := &g.nonces
	for {
		b.mu.Lock()
		n := min(len(b.queue), maxNonceBatch)
		if n == 0 {
			b.running = false
			b.mu.Unlock()
			return
		}
		batch := b.queue[:n:n]
		b.queue = b.queue[n:]
		b.mu.Unlock()
		uses := make([]vdibroker.NonceUse, n)
		expires := batch[0].expires
		for i, r := range batch {
			uses[i] = vdibroker.NonceUse{Pod: r.pod, Nonce: r.nonce}
			expires = later(expires, r.expires)
		}
		cctx, cancel := context.WithTimeout(ctx, g.cfg.PodTimeout)
		refused, err := g.cfg.Store.UseNonces(cctx, uses, expires, g.clock.Now())
		cancel()
		for i, r := range batch {
			switch {
			case err != nil:
				r.err = err
			case refused[i] == nil:
				r.fresh = true
			case vdibroker.ErrorCode(refused[i]) != vdibroker.EUnauthenticated:
				r.err = refused[i] // its budget spent
			}
			close(r.done)
		}
	}
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
