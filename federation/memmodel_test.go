package federation

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
)

// TestMemoryNoncesModel_RG5 (R-SEC): the nonces a Verifier keeps in
// memory, its counts of each budget and each budget's earliest expiry
// (which a call refused for a cap is told to wait for) stay those of a
// plain list of the nonces kept, through seeded runs of calls from a few
// budgets, replays, sweeps and refusals. The list is the model: a sweep
// (a call more than MaxSkew after the last) forgets what expired, and a
// refused call keeps nothing. A call refused for a cap is told a
// Retry-After after which, with no other call between, the next call
// sweeps and frees room for it: its own budget's earliest when its cap
// refused it, every budget's when the total did; and not a whole second
// sooner (unless the wait is the shortest, a second).
func TestMemoryNoncesModel_RG5(t *testing.T) {
	for seed := range uint64(40) {
		t.Run("seed "+strconv.FormatUint(seed, 10), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 54910))
			const perBudget, total = 4, 9
			v := &Verifier{Secrets: NewSecrets([]byte("0123456789abcdef-federation")), maxPerBudget: perBudget, maxTotal: total}
			type kept struct {
				budget string
				until  time.Time
			}
			model := map[string]kept{} // by nonce
			var swept time.Time
			budgets := []string{"ams1", "fra1", "lon1", vdibroker.NoDocumentBudget}
			now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
			var sent []string // every nonce sent, for replays
			earliestOf := func(all bool, budget string) (e time.Time) {
				for _, k := range model {
					if all || k.budget == budget {
						e = earliest(e, k.until)
					}
				}
				return e
			}
			for step := range 400 {
				// Mostly small steps, now and then past a sweep's interval
				// or a nonce's whole keeping.
				switch r := rng.IntN(20); {
				case r < 14:
					now = now.Add(time.Duration(rng.IntN(4000)) * time.Millisecond)
				case r < 18:
					now = now.Add(MaxSkew + time.Duration(rng.IntN(3000))*time.Millisecond)
				default:
					now = now.Add(2*MaxSkew + time.Duration(rng.IntN(3000))*time.Millisecond)
				}
				budget := budgets[rng.IntN(len(budgets))]
				nonce := "n" + strconv.Itoa(step)
				if len(sent) > 0 && rng.IntN(5) == 0 {
					nonce = sent[rng.IntN(len(sent))]
				}
				sent = append(sent, nonce)
				// Signed from a MaxSkew behind to a MaxSkew ahead: kept
				// until its window ends; now and then a few seconds
				// behind, as a call whose clock another call's sweep
				// passed (TestMemoryReplayAfterAnotherCallsSweep_RG5).
				until := now.Add(time.Duration(rng.IntN(int(2*MaxSkew/time.Second)+4)-3) * time.Second)
				err := v.remember(budget, nonce, until, now)

				// The model: sweep, then the refusals in remember's order.
				if now.Sub(swept) > MaxSkew {
					for n, k := range model {
						if now.After(k.until) {
							delete(model, n)
						}
					}
					swept = now
				}
				count := 0
				for _, k := range model {
					if k.budget == budget {
						count++
					}
				}
				_, seen := model[nonce]
				var wantCode, capOf string
				switch {
				case swept.After(until), seen:
					wantCode = vdibroker.EUnauthenticated
				case count >= perBudget:
					wantCode, capOf = vdibroker.ETooManyRequests, budget
				case len(model) >= total:
					wantCode, capOf = vdibroker.ETooManyRequests, "all"
				default:
					model[nonce] = kept{budget: budget, until: until}
				}
				if got := vdibroker.ErrorCode(err); (err == nil) != (wantCode == "") || (err != nil && got != wantCode) {
					t.Fatalf("step %d, %s's %s: %v, want code %q", step, budget, nonce, err, wantCode)
				}
				if capOf != "" {
					soonest := earliestOf(false, budget)
					if capOf == "all" {
						soonest = earliestOf(true, "")
					}
					d := vdibroker.ErrorRetryAfter(err)
					frees := func(at time.Time) bool { return at.Sub(swept) > MaxSkew && at.After(soonest) }
					if d < time.Second || d > 2*MaxSkew+time.Second || d%time.Second != 0 {
						t.Fatalf("step %d: Retry-After %s, want whole seconds in 1s..2m1s", step, d)
					}
					if !frees(now.Add(d)) {
						t.Fatalf("step %d, %s refused for the cap of %s: Retry-After %s, when the next sweep (last at -%s) does not yet free the earliest (in %s)",
							step, budget, capOf, d, now.Sub(swept), soonest.Sub(now))
					}
					if d > time.Second && frees(now.Add(d-time.Second)) {
						t.Fatalf("step %d, %s refused for the cap of %s: Retry-After %s, a second sooner frees room already", step, budget, capOf, d)
					}
				}

				// The bookkeeping is the model's.
				v.mu.Lock()
				if len(v.nonces) != len(model) {
					t.Fatalf("step %d: %d nonces kept, model %d", step, len(v.nonces), len(model))
				}
				counts := map[string]int{}
				for n, k := range model {
					if got, ok := v.nonces[n]; !ok || got.budget != k.budget || !got.until.Equal(k.until) {
						t.Fatalf("step %d: nonce %s kept as %+v (%v), model %+v", step, n, got, ok, k)
					}
					counts[k.budget]++
				}
				for _, b := range budgets {
					if v.counts[b] != counts[b] {
						t.Fatalf("step %d: %q's count %d, model %d", step, b, v.counts[b], counts[b])
					}
					if want := earliestOf(false, b); !want.IsZero() && !v.soonestOf[b].Equal(want) {
						t.Fatalf("step %d: %q's earliest %s, model %s", step, b, v.soonestOf[b], want)
					}
				}
				if want := earliestOf(true, ""); !want.IsZero() && !v.soonest.Equal(want) {
					t.Fatalf("step %d: earliest of all %s, model %s", step, v.soonest, want)
				}
				v.mu.Unlock()
			}
		})
	}
}
