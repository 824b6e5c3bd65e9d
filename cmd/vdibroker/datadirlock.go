package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/vdibroker/vdibroker/federation"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// dataDirBusyError is lockDataDir's refusal: another process holds dir.
// Its message is serve's; restore says its own (its way out is not
// another data dir).
type dataDirBusyError struct{ dir, pid string }

func (e *dataDirBusyError) holder() string {
	if e.pid == "" {
		return ""
	}
	return " (pid " + e.pid + ")"
}

func (e *dataDirBusyError) Error() string {
	return fmt.Sprintf("data dir %s is in use by another vdibroker process%s: stop it, or give this one its own --data-dir (several brokers share state only through PostgreSQL, --database)", e.dir, e.holder())
}

// readsFrom is when a pod on SQLite that took its data dir at locked may
// start its server: the next whole second. The server keeps the nonces
// of pod-to-pod reads in memory and refuses a read signed before the
// second it started in (federation.Verifier.ReadsInMemory, R-G5); the
// process before it verified its last read before it let go of the data
// dir, so in an earlier second than that: a read it took and kept in
// memory only (signed no later than it was verified) is refused by its
// time, even when the process restarted within the second it was signed.
// serve waits for the later of it and the second after the read mark the
// process before left (federation.ReadsFrom), which holds on a clock that
// stepped back too.
func readsFrom(locked time.Time) time.Time {
	return locked.Truncate(time.Second).Add(time.Second)
}

// maxReadsWait bounds serve's wait for a pod on SQLite to take reads: a
// read mark further ahead than a peer's clock may be from this one
// (federation.MaxSkew) says this clock is far behind the one the process
// before ran on; the server then serves at once and refuses the reads
// signed before the mark's second (its peers' calls are refused for
// their time anyway).
const maxReadsWait = federation.MaxSkew

// sleepUntilReads waits until until, the read window's start of a pod on
// SQLite (its server must not answer before, or its peers' first reads
// are refused), at most maxReadsWait.
func sleepUntilReads(until time.Time, log *slog.Logger) {
	d := time.Until(until)
	if d > maxReadsWait {
		log.Warn("pod-to-pod reads: the process before on this data dir verified reads until after this clock's time by more than a peer's clock may differ; reads signed before then are refused", "readsFrom", until)
		d = maxReadsWait
	}
	if d > time.Second {
		log.Info("pod-to-pod reads: waiting for the read mark the process before left (a crash, or this clock behind its)", "readsFrom", until, "wait", d)
	}
	time.Sleep(d)
}

// startReadMark moves srv's pod-to-pod read mark ahead until the returned
// stop (vhttp.Server.KeepReadMark).
func startReadMark(srv *vhttp.Server) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.KeepReadMark(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
}
