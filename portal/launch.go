package portal

import (
	"context"
	"encoding/json"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/internal/ratelimit"
	"github.com/vdibroker/vdibroker/internal/webguard"
)

// Launches (R-U4, R-U7). Opening a resource is a POST that starts the
// connect as the signed-in user and answers with the launch's page; the
// connect runs on (held while a host starts, ?wait=) and the page's
// script polls the launch's status, then fetches its file. A launch
// lives in this replica's memory: its id is 256 random bits, it answers
// only the sign-in (browser session) that made it, its file is handed
// once, and it is forgotten launchTTL after it ended (MaxWait and
// launchTTL after it began at the latest). The launches are bounded per
// sign-in and in all.

// Defaults of Config.MaxLaunches and Config.MaxLaunchesPerSession.
const (
	DefaultMaxLaunches           = 1000
	DefaultMaxLaunchesPerSession = 3
)

// launchTTL is how long an ended launch's status and file are kept.
const launchTTL = 2 * time.Minute

// Launch states.
const (
	launchWaiting = "waiting"
	launchReady   = "ready"
	launchFailed  = "failed"
)

// launch is one opening of a resource.
type launch struct {
	id string
	// owner is the hash of the sign-in's cookie: the only browser the
	// launch answers.
	owner   string
	name    string
	created time.Time
	expires time.Time
	state   string
	// starting: the connect is held for Host to start, until Until
	// (vdibroker.WaitEvent).
	starting bool
	host     string
	until    time.Time
	rdp      string
	message  string
}

// launches are the launches of this replica, by id.
type launches struct {
	mu         sync.Mutex
	m          map[string]*launch
	max, perSt int
}

func newLaunches(max, perSession int) *launches {
	if max <= 0 {
		max = DefaultMaxLaunches
	}
	if perSession <= 0 {
		perSession = DefaultMaxLaunchesPerSession
	}
	return &launches{m: map[string]*launch{}, max: max, perSt: perSession}
}

// add keeps l, or refuses it (TooManyRequests) when its sign-in or the
// replica has as many launches as allowed. Expired launches go first.
func (ls *launches) add(l *launch, now time.Time) error {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	n := 0
	for id, o := range ls.m {
		if !now.Before(o.expires) {
			delete(ls.m, id)
			continue
		}
		if o.owner == l.owner {
			n++
		}
	}
	if n >= ls.perSt || len(ls.m) >= ls.max {
		return &vdibroker.Error{Code: vdibroker.ETooManyRequests, Message: "too many launches under way", RetryAfter: 10 * time.Second}
	}
	ls.m[l.id] = l
	return nil
}

// get returns a copy of launch id if owner made it and it has not
// expired.
func (ls *launches) get(id, owner string, now time.Time) (launch, bool) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	l := ls.m[id]
	if l == nil || !webguard.Equal(l.owner, owner) || !now.Before(l.expires) {
		return launch{}, false
	}
	return *l, true
}

// take returns launch id's file and forgets the launch, if owner made
// it and it is ready: a file is handed once.
func (ls *launches) take(id, owner string, now time.Time) (launch, bool) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	l := ls.m[id]
	if l == nil || !webguard.Equal(l.owner, owner) || !now.Before(l.expires) || l.state != launchReady {
		return launch{}, false
	}
	delete(ls.m, id)
	return *l, true
}

// update changes launch id under the lock (gone: nothing).
func (ls *launches) update(id string, f func(*launch)) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if l := ls.m[id]; l != nil {
		f(l)
	}
}

// owner is the launches' owner key of a sign-in.
func owner(rq *request) string { return vdibroker.HashSecret(rq.sess.ID()) }

// launch is POST /portal/launch: the resource (a feed id) must be in the
// user's feed; its connect starts as the user and the browser is sent to
// the launch's page.
func (p *Portal) launch(rq *request) {
	id := rq.r.PostFormValue("resource")
	if _, _, err := vdibroker.ParseResourceID("resource", id); err != nil {
		p.errorPage(rq.w, rq.r, http.StatusBadRequest, "error.badResource")
		return
	}
	ctx := rq.r.Context()
	var feed vdibroker.Feed
	if err := rq.api.do(ctx, http.MethodGet, "/api/v1/feed", nil, &feed); err != nil {
		p.apiError(rq, err)
		return
	}
	var res *vdibroker.FeedResource
	for i := range feed.Resources {
		if feed.Resources[i].ID == id {
			res = &feed.Resources[i]
		}
	}
	if res == nil {
		p.errorPage(rq.w, rq.r, http.StatusNotFound, "error.badResource")
		return
	}
	now := p.clock.Now()
	l := &launch{id: webguard.Secret(p.rand), owner: owner(rq), name: res.FriendlyName, created: now,
		expires: now.Add(p.cfg.MaxWait + launchTTL), state: launchWaiting}
	if err := p.launches.add(l, now); err != nil {
		rq.w.Header().Set("Retry-After", "10")
		p.errorPage(rq.w, rq.r, http.StatusTooManyRequests, "error.launches")
		return
	}
	who := rq.api.who
	if who == nil {
		kind, tokenID, _ := strings.Cut(rq.sess.Principal, ":")
		who = &vdibroker.Principal{Kind: kind, TokenID: tokenID, Subject: feed.User, Role: rq.sess.Role}
	}
	p.wg.Add(1)
	go p.run(l.id, rq.api, *res, who, ratelimit.ClientAddr(rq.r))
	http.Redirect(rq.w, rq.r, Prefix+"launches/"+l.id, http.StatusSeeOther)
}

// run connects for launch id as api's user, held up to MaxWait while a
// host starts (a global entitlement's connect is not held), and keeps
// the answer; the launch is recorded in the audit trail (R-U7).
func (p *Portal) run(id string, api *caller, res vdibroker.FeedResource, who *vdibroker.Principal, addr string) {
	defer p.wg.Done()
	ctx, cancel := context.WithTimeout(p.ctx, p.cfg.MaxWait+time.Minute)
	defer cancel()
	ctx = vdibroker.WithWaitObserver(ctx, func(e vdibroker.WaitEvent) {
		// Waiting: held for a starting host; else decided again, which
		// may find the host still starting (and waits on, untold).
		p.launches.update(id, func(l *launch) {
			l.starting, l.until = true, e.Until
			if e.Host != "" {
				l.host = e.Host
			}
		})
	})
	path := res.ConnectURL
	if res.GlobalEntitlement == "" {
		path += "?wait=" + strconv.Itoa(int(p.cfg.MaxWait/time.Second))
	}
	var ans vdibroker.ConnectResponse
	err := api.do(ctx, http.MethodPost, path, res.ConnectBody, &ans)
	now := p.clock.Now()
	p.launches.update(id, func(l *launch) {
		l.expires = now.Add(launchTTL)
		if err != nil {
			l.state, l.message = launchFailed, vdibroker.ErrorMessage(err)
			return
		}
		l.state, l.rdp, l.host = launchReady, ans.RDPFile, ans.SessionHost
	})
	p.audit(context.WithoutCancel(ctx), res, who, addr, &ans, err, now)
}

// audit records a launch: who opened what, and the session it got or
// why not.
func (p *Portal) audit(ctx context.Context, res vdibroker.FeedResource, who *vdibroker.Principal, addr string, ans *vdibroker.ConnectResponse, err error, now time.Time) {
	if p.cfg.Audit == nil {
		return
	}
	e := &vdibroker.AuditEntry{Time: now.UTC(), Principal: who.Audit(), RemoteAddr: addr, Action: "portal.launch",
		Target: strings.TrimPrefix(res.ConnectURL, "/api/v1/"), HostPool: res.HostPool, Outcome: vdibroker.AuditOK}
	if err != nil {
		e.Outcome, e.Error = vdibroker.AuditRefused, vdibroker.Cut(vdibroker.ErrorCode(err)+": "+vdibroker.ErrorMessage(err), vdibroker.MaxAuditField)
	} else {
		e.HostPool = ans.HostPool
		e.After, _ = json.Marshal(map[string]string{"resource": res.ID, "sessionId": ans.SessionID, "sessionHost": ans.SessionHost})
	}
	e.Bound()
	if aerr := p.cfg.Audit.AppendAudit(ctx, e); aerr != nil {
		p.log.Error("portal: audit a launch", "err", aerr)
	}
}

// launchView is a launch as its page and its status show it.
type launchView struct {
	State   string `json:"state"`
	Title   string `json:"title"`
	Message string `json:"message"`
	Waited  string `json:"waited,omitempty"`
	// Percent is the wait's progress towards its end (0..99).
	Percent int    `json:"percent"`
	File    string `json:"file,omitempty"`
}

func (p *Portal) view(l launch, lg *lang, now time.Time) launchView {
	v := launchView{State: l.state}
	switch l.state {
	case launchReady:
		v.Title, v.Message, v.Percent = lg.T("launch.ready", l.name), lg.T("launch.ready", l.name), 100
		v.File = Prefix + "launches/" + l.id + "/file"
	case launchFailed:
		v.Title, v.Message = lg.T("error.title"), lg.T("launch.failed", l.name, l.message)
	default:
		v.Title, v.Message = lg.T("launch.preparing", l.name), lg.T("launch.preparing", l.name)
		if l.starting {
			host := l.host
			if host == "" {
				host = l.name
			}
			v.Title, v.Message = lg.T("launch.starting"), lg.T("launch.startingOn", host)
			v.Waited = lg.T("launch.waited", int(now.Sub(l.created)/time.Second))
			if total := l.until.Sub(l.created); total > 0 {
				v.Percent = min(99, int(100*now.Sub(l.created)/total))
			}
		}
	}
	return v
}

// launchPage is the launch's page: its state now, and the script that
// polls the status and fetches the file.
func (p *Portal) launchPage(rq *request) {
	now := p.clock.Now()
	l, ok := p.launches.get(rq.r.PathValue("id"), owner(rq), now)
	if !ok {
		p.errorPage(rq.w, rq.r, http.StatusNotFound, "launch.gone")
		return
	}
	p.render(rq.w, http.StatusOK, "launch", rq.lang, map[string]any{"Launch": p.view(l, rq.lang, now),
		"Status": Prefix + "launches/" + l.id + "/status", "CSRF": rq.sess.CSRF, "SignedIn": true})
}

// status is the launch's state as JSON (launchView).
func (p *Portal) status(rq *request) {
	now := p.clock.Now()
	l, ok := p.launches.get(rq.r.PathValue("id"), owner(rq), now)
	if !ok {
		rq.w.Header().Set("Content-Type", "application/json")
		rq.w.WriteHeader(http.StatusNotFound)
		json.NewEncoder(rq.w).Encode(launchView{State: "gone", Message: rq.lang.T("launch.gone")})
		return
	}
	rq.w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(rq.w).Encode(p.view(l, rq.lang, now))
}

// file hands the launch's .rdp file, once.
func (p *Portal) file(rq *request) {
	id := rq.r.PathValue("id")
	now := p.clock.Now()
	l, ok := p.launches.take(id, owner(rq), now)
	if !ok {
		if _, waiting := p.launches.get(id, owner(rq), now); waiting {
			http.Redirect(rq.w, rq.r, Prefix+"launches/"+id, http.StatusSeeOther)
			return
		}
		p.errorPage(rq.w, rq.r, http.StatusNotFound, "launch.gone")
		return
	}
	rq.w.Header().Set("Content-Type", "application/x-rdp")
	rq.w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": fileName(l.name)}))
	rq.w.Write([]byte(l.rdp))
}

// fileName is a resource's friendly name as an .rdp file's name the
// user recognises: letters, digits, spaces, '-', '_' and '.' kept (any
// script), everything else '_', at most 64 characters, never empty or
// hidden.
func fileName(friendly string) string {
	var b strings.Builder
	n := 0
	for _, r := range friendly {
		if n == 64 {
			break
		}
		switch {
		case unicode.IsLetter(r), unicode.IsDigit(r), r == '-', r == '_', r == '.':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune(' ')
		default:
			b.WriteRune('_')
		}
		n++
	}
	name := strings.Trim(b.String(), " ._")
	if name == "" {
		name = "desktop"
	}
	return name + ".rdp"
}
