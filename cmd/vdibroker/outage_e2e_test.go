//go:build unix

package main

// Outage end-to-end tests (R-OUT): real `vdibroker serve` processes and real
// `vdibroker agent`s, on a PostgreSQL server of the test's own
// (internal/pgtest) that is stopped, or paused with SIGSTOP, while
// sessions are open; and on SQLite whose disk fills up. Nothing is faked:
// the brokers learn of the outage the way they would in production.

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // read the escrow table

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/internal/pgtest"
)

const (
	outagePool         = "outage"
	outageAdmin        = "vdb_admin_e2e_outage_test_token"
	outageStoreTimeout = 2 * time.Second
	outageLimit        = 4 // maxSessionLimit of the pool
)

// outageBroker is one `vdibroker serve` replica.
type outageBroker struct {
	proc    *e2eProc
	api     e2eAPI
	dataDir string
	args    []string // serve's flags besides --listen and --data-dir
}

// outageHost is one host and its real agent, whose sessions file the test
// writes as users log on and off.
type outageHost struct {
	name, file string
	stateDir   string // the agent's, with its credential
	agent      *e2eProc
	users      map[string]bool
}

type outageWorld struct {
	t       testing.TB
	bin     string
	brokers []*outageBroker
	hosts   []*outageHost
	// placed is every session a broker acknowledged: user -> its answer.
	placed map[string]outageConnect
	limit  int // the pool's maxSessionLimit
}

// outageConnect is a connect's answer as the test reads it.
type outageConnect struct {
	Status      int
	SessionID   string `json:"sessionId"`
	SessionHost string `json:"sessionHost"`
	State       string `json:"state"`
	Reconnect   bool   `json:"reconnect"`
	Error       *vdibroker.Error
	RetryAfter  string
	Took        time.Duration
}

// connect posts a connect of user to broker i; the answer's Took is for
// the outage benchmark, the tests check no figure of speed.
func (w *outageWorld) connect(i int, user string) outageConnect {
	w.t.Helper()
	a, err := w.try(i, user)
	if err != nil {
		w.t.Fatalf("connect %s through broker %d: %v", user, i, err)
	}
	return a
}

// outageClient is the connects' client: keep-alive connections to every
// broker, and a bound that only ends a hung request.
var outageClient = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}

// try is connect for goroutines: a failed request is returned, not fatal.
func (w *outageWorld) try(i int, user string) (outageConnect, error) {
	req, _ := http.NewRequest("POST", w.brokers[i].api.base+"/api/v1/hostpools/"+outagePool+"/connect", strings.NewReader(`{"user":"`+user+`"}`))
	req.Header.Set("Authorization", "Bearer "+outageAdmin)
	req.Header.Set("Content-Type", "application/json")
	t0 := time.Now()
	res, err := outageClient.Do(req)
	if err != nil {
		return outageConnect{}, err
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	a := outageConnect{Status: res.StatusCode, RetryAfter: res.Header.Get("Retry-After"), Took: time.Since(t0)}
	if res.StatusCode >= 300 {
		var body struct {
			Error *vdibroker.Error `json:"error"`
		}
		json.Unmarshal(data, &body)
		a.Error = body.Error
		return a, nil
	}
	if err := json.Unmarshal(data, &a); err != nil {
		return a, fmt.Errorf("decode %s: %w", data, err)
	}
	return a, nil
}

// start runs the brokers on dsn ("" = SQLite in dataDirs[0]), the pool, and
// one agent per host, each heartbeating to broker i%len(brokers).
func startOutageWorld(t testing.TB, bin, dsn string, dataDirs []string, hosts int, extra ...string) *outageWorld {
	return startOutageWorldLimit(t, bin, dsn, dataDirs, hosts, outageLimit, extra...)
}

// startOutageWorldLimit is startOutageWorld with the pool's maxSessionLimit.
func startOutageWorldLimit(t testing.TB, bin, dsn string, dataDirs []string, hosts, limit int, extra ...string) *outageWorld {
	t.Helper()
	w := &outageWorld{t: t, bin: bin, placed: map[string]outageConnect{}, limit: limit}
	for i, dir := range dataDirs {
		// Debug: the tests count the access lines of heartbeats, which
		// are debug when they succeed.
		args := []string{"--store-timeout", outageStoreTimeout.String(), "--maintenance-interval", "500ms", "--replica-id", fmt.Sprintf("replica-%d", i), "--log-level", "debug"}
		if dsn != "" {
			args = append(args, "--database", dsn)
		}
		args = append(args, extra...)
		p, base := e2eServeAt(t, bin, dir, outageAdmin, "127.0.0.1:0", args...)
		w.brokers = append(w.brokers, &outageBroker{proc: p, api: e2eAPI{tb: t, base: base, token: outageAdmin}, dataDir: dir, args: args})
	}
	api := w.brokers[0].api
	api.call("PUT", "/hostpools/"+outagePool, map[string]any{
		"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst", "heartbeatTimeoutSeconds": 30,
		"maxSessionLimit": limit,
	}, 201, nil)
	var tok struct {
		Token string `json:"token"`
	}
	api.call("POST", "/hostpools/"+outagePool+"/registrationtoken", map[string]any{"expiresInSeconds": 3600}, 201, &tok)
	dir := t.TempDir()
	for i := range hosts {
		name := fmt.Sprintf("oh-%02d", i)
		h := &outageHost{name: name, file: filepath.Join(dir, fmt.Sprintf("sessions-%d.json", i)), stateDir: filepath.Join(dir, name), users: map[string]bool{}}
		e2eWriteSessions(t, h.file, nil)
		h.agent = e2eStart(t, bin, nil, io.Discard, "agent", "--server", w.brokers[i%len(w.brokers)].api.base, "--registration-token", tok.Token,
			"--host-name", h.name, "--address", "127.0.0.1:3389", "--state-dir", h.stateDir,
			"--heartbeat-interval", "1s", "--sessions-provider", "file:"+h.file)
		w.hosts = append(w.hosts, h)
	}
	for _, h := range w.hosts {
		e2eEventually(t, h.name+" Available", 60*time.Second, func() bool {
			got, ok := api.tryHost(outagePool, h.name)
			return ok && got.Status == vdibroker.StatusAvailable
		})
	}
	return w
}

// logOn writes the users placed on each host into its agent's sessions
// file: they logged on (R-S2 turns their sessions Active).
func (w *outageWorld) logOn() {
	w.t.Helper()
	for _, h := range w.hosts {
		var list []vdibroker.AgentSession
		for user, a := range w.placed {
			if a.SessionHost == h.name {
				list = append(list, vdibroker.AgentSession{ID: "s-" + user, User: user, State: vdibroker.StateActive})
			}
		}
		e2eWriteSessions(w.t, h.file, list)
	}
}

// openSessions returns the pool's open sessions by user.
func (w *outageWorld) openSessions() map[string]vdibroker.UserSession {
	w.t.Helper()
	out := map[string]vdibroker.UserSession{}
	for after := ""; ; {
		list := w.brokers[0].api.sessions(outagePool, url.Values{"limit": {"100"}, "after": {after}})
		for _, s := range list {
			if d, ok := out[s.User]; ok {
				// Two open sessions of one user: keep the first
				// acknowledged, and say so (afterRecovery waits for the
				// host's next report to end the twin, R-OUT3).
				s.EndReason = "twin of " + d.ID
				if d.CreateTime.Before(s.CreateTime) {
					d.EndReason = "twin of " + s.ID
					s, d = d, s
				}
			}
			out[s.User] = s
		}
		if len(list) < 100 {
			return out
		}
		after = list[len(list)-1].ID
	}
}

// place connects n users u<i>, alternately through each broker, and lets
// them log on; it waits until every session is Active and every broker
// has answered each user once (so each knows every session: R-C1).
func (w *outageWorld) place(n int) {
	w.t.Helper()
	for i := range n {
		user := fmt.Sprintf("u%d", i)
		a := w.connect(i%len(w.brokers), user)
		if a.Status != http.StatusCreated {
			w.t.Fatalf("connect %s: %d %+v", user, a.Status, a.Error)
		}
		w.placed[user] = a
	}
	w.logOn()
	e2eEventually(w.t, "every session Active", 60*time.Second, func() bool {
		open := w.openSessions()
		for user := range w.placed {
			if open[user].State != vdibroker.StateActive {
				return false
			}
		}
		return true
	})
	for user, want := range w.placed {
		for i := range w.brokers {
			if a := w.connect(i, user); a.Status != http.StatusOK || !a.Reconnect || a.SessionID != want.SessionID {
				w.t.Fatalf("reconnect %s through broker %d before the outage: %+v, want session %s", user, i, a, want.SessionID)
			}
		}
	}
}

// waitHealth waits until every broker's /healthz answers want.
func (w *outageWorld) waitHealth(want int, within time.Duration) {
	w.t.Helper()
	for i, b := range w.brokers {
		e2eEventually(w.t, fmt.Sprintf("broker %d /healthz %d", i, want), within, func() bool {
			return httpStatus(b.api.base+"/healthz") == want
		})
	}
}

// consolePage returns the body of a console page.
func consolePage(t testing.TB, u string) string {
	t.Helper()
	c := http.Client{Timeout: 5 * time.Second}
	res, err := c.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return string(b)
}

func httpStatus(u string) int {
	c := http.Client{Timeout: 5 * time.Second}
	res, err := c.Get(u)
	if err != nil {
		return 0
	}
	res.Body.Close()
	return res.StatusCode
}

// duringOutage checks what every broker answers while the store is down:
// /healthz 503 and ?live 200, reconnects of every known user 200 on their
// host with reconnect: true, and a new user refused with 503
// StoreUnavailable and Retry-After (unless placing, when outage placement
// is on: see outagePlacement). How fast is not checked (outageClient's
// 30 s only ends a hung request): that none of these waits for the store
// is TestStoreOutage_PostgreSQL's (http), which counts the calls that
// reach it.
func (w *outageWorld) duringOutage(refuseNew bool) {
	w.t.Helper()
	w.waitHealth(http.StatusServiceUnavailable, outageStoreTimeout+5*time.Second)
	for i, b := range w.brokers {
		if got := httpStatus(b.api.base + "/healthz?live"); got != http.StatusOK {
			w.t.Errorf("broker %d: /healthz?live = %d during the outage, want 200", i, got)
		}
		if page := consolePage(w.t, b.api.base+"/signin"); !strings.Contains(page, `id="outage"`) {
			w.t.Errorf("broker %d: the console's header does not show the outage:\n%s", i, page)
		}
	}
	for user, want := range w.placed {
		for i := range w.brokers {
			a := w.connect(i, user)
			if a.Status != http.StatusOK || !a.Reconnect || a.SessionHost != want.SessionHost || a.SessionID != want.SessionID {
				w.t.Errorf("reconnect %s through broker %d during the outage: %d %+v, want 200 session %s on %s", user, i, a.Status, a, want.SessionID, want.SessionHost)
			}
		}
	}
	if !refuseNew {
		return
	}
	for i := range w.brokers {
		a := w.connect(i, fmt.Sprintf("newcomer-%d", i))
		if a.Status != http.StatusServiceUnavailable || a.Error == nil || a.Error.Code != vdibroker.EStoreUnavailable || a.RetryAfter == "" {
			w.t.Errorf("new user through broker %d during the outage: %d %+v Retry-After %q, want 503 StoreUnavailable with Retry-After", i, a.Status, a.Error, a.RetryAfter)
		}
	}
}

// afterRecovery checks, once the store is back (with the same broker
// processes, or after a failed disk restarted ones): every acknowledged session is open on its host, each host's
// count is its open sessions exactly and within the limit, no host is
// Unavailable (the held heartbeats were applied), and new connects work.
func (w *outageWorld) afterRecovery() {
	w.t.Helper()
	w.waitHealth(http.StatusOK, 30*time.Second)
	for i, b := range w.brokers {
		select {
		case <-b.proc.done:
			w.t.Fatalf("broker %d exited: %v", i, b.proc.err)
		default:
		}
	}
	for i, b := range w.brokers {
		if page := consolePage(w.t, b.api.base+"/signin"); strings.Contains(page, `id="outage"`) {
			w.t.Errorf("broker %d: the console's header still shows the outage after recovery", i)
		}
	}
	var open map[string]vdibroker.UserSession
	var missing []string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		open, missing = w.openSessions(), nil
		for user, a := range w.placed {
			if s, ok := open[user]; !ok || s.ID != a.SessionID || strings.HasPrefix(s.EndReason, "twin of ") {
				missing = append(missing, fmt.Sprintf("%s (acknowledged %s on %s, open: %+v)", user, a.SessionID, a.SessionHost, s))
			}
		}
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			all := w.brokers[0].api.sessions(outagePool, url.Values{"state": {vdibroker.StateLoggedOff}})
			w.t.Fatalf("acknowledged sessions not open after recovery: %v\nended: %+v", missing, all)
		}
	}
	perHost := map[string]int{}
	for user, s := range open {
		perHost[s.SessionHost]++
		if a, ok := w.placed[user]; !ok {
			w.t.Errorf("session of %s on %s open after recovery, but no broker acknowledged it", user, s.SessionHost)
		} else if s.SessionHost != a.SessionHost {
			w.t.Errorf("session of %s on %s, acknowledged on %s", user, s.SessionHost, a.SessionHost)
		}
	}
	if len(open) != len(w.placed) {
		w.t.Errorf("%d open sessions after recovery, %d acknowledged", len(open), len(w.placed))
	}
	for _, h := range w.hosts {
		got := w.brokers[0].api.host(outagePool, h.name)
		if got.Sessions != perHost[h.name] {
			w.t.Errorf("host %s counts %d sessions, %d are open", h.name, got.Sessions, perHost[h.name])
		}
		if got.Sessions > w.limit {
			w.t.Errorf("host %s has %d sessions, over its limit %d", h.name, got.Sessions, w.limit)
		}
		if got.Status == vdibroker.StatusUnavailable {
			w.t.Errorf("host %s Unavailable after recovery: its heartbeats during the outage were lost", h.name)
		}
	}
}

// TestOutageE2E (R-OUT): two real brokers on one PostgreSQL server the
// test stops, and separately pauses (SIGSTOP), with sessions open; and
// with --outage-placement, both cut off at once; and one broker on SQLite
// whose disk fills up, and one whose disk fails (goes read-only).
func TestOutageE2E(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: builds the binary and runs PostgreSQL servers")
	}
	bin := e2eBuild(t, t.TempDir())
	for _, mode := range []string{"stopped", "paused"} {
		t.Run("postgres "+mode, func(t *testing.T) {
			pg := pgtest.Start(t)
			w := startOutageWorld(t, bin, pg.DSN, []string{t.TempDir(), t.TempDir()}, 3)
			w.place(6)
			if mode == "stopped" {
				pg.Stop()
			} else {
				pg.Pause()
			}
			w.duringOutage(true)
			if mode == "stopped" {
				pg.Restart()
			} else {
				pg.Resume()
			}
			w.afterRecovery()
			// New connects work again, on both brokers.
			for i := range w.brokers {
				if a := w.connect(i, fmt.Sprintf("after-%d", i)); a.Status != http.StatusCreated {
					t.Errorf("new user through broker %d after recovery: %d %+v", i, a.Status, a.Error)
				}
			}
		})
	}
	t.Run("postgres outage placement", func(t *testing.T) { testOutagePlacementE2E(t, bin) })
	t.Run("sqlite disk full", func(t *testing.T) { testOutageDiskFullE2E(t, bin) })
	t.Run("sqlite read-only disk", func(t *testing.T) { testOutageReadOnlyDiskE2E(t, bin) })
}

// testOutagePlacementE2E (R-OUT2, R-OUT3): two brokers with
// --outage-placement hold escrows while PostgreSQL is up; it stops, and
// new users are placed by both within their own shares until each has
// none left (then 503). After recovery every placed session is written,
// with a decision record marked outageMode, and no host is over its limit.
//
// Worked numbers: 3 hosts, maxSessionLimit 4, 6 users placed before (about
// 2 per host, breadth-first): 2 free slots per host. The first replica to
// renew asks ceil(25 % of 2) = 1 slot per host; the other then has 2 - 1 =
// 1 free and asks ceil(25 % of 1) = 1. So each replica can place 3 users
// during the outage, 6 in all, and every host ends at exactly 4. What each
// may place is read from the escrow table just before the outage, so a
// draw that put 3 users on one host changes the numbers, not the checks.
func testOutagePlacementE2E(t *testing.T, bin string) {
	pg := pgtest.Start(t)
	w := startOutageWorld(t, bin, pg.DSN, []string{t.TempDir(), t.TempDir()}, 3,
		"--outage-placement", "--outage-share", "25", "--outage-escrow-renew", "1s")
	w.place(6)
	share := waitEscrowsSettled(t, pg.DSN, 2)
	pg.Stop()
	w.duringOutage(false)
	var outage []string
	perBroker := make([]int, len(w.brokers))
	for i := range w.brokers {
		for n := 0; ; n++ {
			user := fmt.Sprintf("outage-%d-%d", i, n)
			a := w.connect(i, user)
			if a.Status == http.StatusServiceUnavailable {
				if a.Error == nil || a.Error.Code != vdibroker.EStoreUnavailable || a.RetryAfter == "" {
					t.Errorf("broker %d past its share: %+v Retry-After %q, want StoreUnavailable with Retry-After", i, a.Error, a.RetryAfter)
				}
				break
			}
			if a.Status != http.StatusCreated || a.Reconnect || a.SessionID == "" {
				t.Fatalf("outage placement of %s through broker %d: %d %+v", user, i, a.Status, a)
			}
			if n > 3*outageLimit {
				t.Fatalf("broker %d placed %d users during the outage, more than the hosts' limits", i, n)
			}
			w.placed[user] = a
			outage = append(outage, user)
			perBroker[i]++
			// A reconnect of an outage placement is answered from memory.
			if b := w.connect(i, user); b.Status != http.StatusOK || !b.Reconnect || b.SessionID != a.SessionID {
				t.Errorf("reconnect %s during the outage: %d %+v, want its outage session %s", user, b.Status, b, a.SessionID)
			}
		}
	}
	for i, n := range perBroker {
		if want := share[fmt.Sprintf("replica-%d", i)]; n != want || n == 0 {
			t.Errorf("broker %d placed %d users during the outage, want its share of %d (and not 0)", i, n, want)
		}
	}
	w.logOn() // the outage's users log on; the agents report them
	pg.Restart()
	w.afterRecovery()
	for _, user := range outage {
		var rec struct {
			OutageMode bool   `json:"outageMode"`
			Chosen     string `json:"chosen"`
			Note       string `json:"note"`
		}
		w.brokers[0].api.call("GET", "/hostpools/"+outagePool+"/usersessions/"+w.placed[user].SessionID+"/placement", nil, 200, &rec)
		if !rec.OutageMode || rec.Chosen != w.placed[user].SessionHost || !strings.Contains(rec.Note, "outage mode") {
			t.Errorf("decision record of %s: %+v, want outageMode on %s", user, rec, w.placed[user].SessionHost)
		}
	}
	// With the store back, new users through each broker in turn fill the
	// pool up to its limit, less what the escrows hold back: a replica may
	// use its own share, never another's (R-OUT2). At most one slot per
	// host stays held back (the last free slot of a host, rounded up to
	// one replica's share), and no host goes over its limit.
	for round := range 2 {
		for i := range w.brokers {
			for n := 0; n < 3*outageLimit; n++ {
				a := w.connect(i, fmt.Sprintf("late-%d-%d-%d", round, i, n))
				if a.Status == http.StatusCreated {
					continue
				}
				if a.Error == nil || a.Error.Code != vdibroker.ENoCapacity {
					t.Errorf("new user through broker %d after recovery: %d %+v, want 201 or NoCapacity", i, a.Status, a.Error)
				}
				break
			}
		}
	}
	for _, h := range w.hosts {
		got := w.brokers[0].api.host(outagePool, h.name)
		if got.Sessions > outageLimit || got.Sessions < outageLimit-1 {
			t.Errorf("host %s has %d sessions after new users filled the pool, want %d (its limit) or one fewer (held in escrow)", h.name, got.Sessions, outageLimit)
		}
	}
}

// waitEscrowsSettled waits until each of replicas has renewed its escrows
// twice more since its rows first appeared (outage placement uses the
// smaller of the last two grants, and the numbers no longer move), and
// returns each replica's slots in all.
func waitEscrowsSettled(t testing.TB, dsn string, replicas int) map[string]int {
	t.Helper()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	seen := map[string][]int64{}
	slots := map[string]int{}
	e2eEventually(t, "the escrows renewed twice", 60*time.Second, func() bool {
		rows, err := db.Query(`SELECT replica, MAX(expire_time), SUM(slots) FROM outage_escrow GROUP BY replica`)
		if err != nil {
			return false
		}
		defer rows.Close()
		for rows.Next() {
			var r string
			var exp int64
			var n int
			if rows.Scan(&r, &exp, &n) != nil {
				continue
			}
			slots[r] = n
			if l := seen[r]; len(l) == 0 || l[len(l)-1] != exp {
				seen[r] = append(l, exp)
			}
		}
		settled := 0
		for _, l := range seen {
			if len(l) >= 3 {
				settled++
			}
		}
		return settled == replicas
	})
	t.Logf("escrowed slots before the outage: %v", slots)
	return slots
}

// testOutageDiskFullE2E: one broker on SQLite whose data directory is a
// tiny tmpfs the test fills (ENOSPC, which goes away when room is made). The write
// probe finds it: /healthz 503, reconnects answered, new users refused
// cleanly; with room again it recovers by itself, with no restart, and
// nothing is lost. A disk that fails for good is testOutageReadOnlyDiskE2E.
func testOutageDiskFullE2E(t *testing.T, bin string) {
	dir := t.TempDir()
	if os.Geteuid() != 0 {
		t.Skip("disk-failure end-to-end: needs root to mount a tiny tmpfs")
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("disk-failure end-to-end: cannot mount a tmpfs here: %v %s", err, out)
	}
	t.Cleanup(func() {
		// umount -l (MNT_DETACH), which syscall names on Linux only: the
		// file is built for every unix.
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("unmount %s: %v %s", dir, err, out)
		}
	})
	w := startOutageWorld(t, bin, "", []string{filepath.Join(dir, "broker")}, 2)
	w.place(4)
	filler := filepath.Join(dir, "filler")
	fillFile(t, filler)
	w.duringOutage(true)
	if reason := storeReason(t, w.brokers[0].api); !strings.Contains(reason, "no space") && !strings.Contains(reason, "cannot write") {
		t.Errorf("/healthz reason %q, want the full disk named", reason)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	w.afterRecovery()
	if a := w.connect(0, "after-disk"); a.Status != http.StatusCreated {
		t.Errorf("new user after the disk has room again: %d %+v", a.Status, a.Error)
	}
}

// fillFile writes path until its disk is full.
func fillFile(t testing.TB, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := bytes.Repeat([]byte{1}, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return
			}
			t.Fatal(err)
		}
	}
}
