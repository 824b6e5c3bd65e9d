package portal

import (
	"context"
	"encoding/json"
	"math"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/federation"
	"github.com/vdibroker/vdibroker/internal/ratelimit"
	"github.com/vdibroker/vdibroker/internal/webguard"
)

// Launches (R-U4, R-U7). Opening a resource is a POST that starts the
// connect as the signed-in user and answers with the launch's page; the
// connect runs on (held while a host starts, ?wait=) and the page's
// script polls the launch's status, then fetches its file. A launch is
// kept in the database (vdibroker.PortalLaunchStore), so any replica
// answers its status and hands its file: the browser polls wherever the
// load balancer sends it. Its id is 256 random bits, stored only as its
// hash, and its file is sealed under a key derived from the id; it
// answers only the sign-in (browser session) that made it, its file is
// handed once across replicas, and it is forgotten launchTTL after it
// ended (MaxWait and launchTTL after it began at the latest). The
// launches are bounded per sign-in and in the pod.

// Defaults of Config.MaxLaunches and Config.MaxLaunchesPerSession.
const (
	DefaultMaxLaunches           = 100_000
	DefaultMaxLaunchesPerSession = 3
)

// launchTTL is how long an ended launch's status and file are kept.
const launchTTL = 2 * time.Minute

// gatewayTokenLine starts the line of an .rdp file that carries an RD
// gateway access token (R-GW1): one tunnel, within the token's lifetime.
const gatewayTokenLine = "gatewayaccesstoken:s:"

// Launch states.
const (
	launchWaiting = "waiting"
	launchReady   = "ready"
	launchFailed  = "failed"
)

// fileInfo is the purpose of the key sealing a launch's file.
const fileInfo = "vdibroker portal launch file"

// owner is the launches' owner key of a sign-in.
func owner(rq *request) string { return vdibroker.HashSecret(rq.sess.ID()) }

// launch is POST /portal/launch: the resource (a feed id) must be in the
// user's feed; its connect starts as the user and the browser is sent to
// the launch's page. A Reconnect of a row of "My sessions" names the
// row's session too (session, pool, and pod for another pod's), which
// the connect reconnects if it still can (R-C1, R-G1, R-U3).
func (p *Portal) launch(rq *request) {
	id := rq.r.PostFormValue("resource")
	if _, _, err := vdibroker.ParseResourceID("resource", id); err != nil {
		p.userError(rq, http.StatusBadRequest, "error.badResource")
		return
	}
	want, err := sessionOfForm(rq.r)
	if err != nil {
		// Not a form of the page's: its fields are the page's own.
		p.log.Info("portal: a launch names a malformed session", "request_id", rq.api.requestID, "err", vdibroker.ErrorMessage(err))
		p.userError(rq, http.StatusBadRequest, "error.sessionGone")
		return
	}
	ctx := rq.r.Context()
	var feed vdibroker.Feed
	if err := rq.api.do(ctx, http.MethodGet, "/api/v1/feed", nil, &feed); err != nil {
		p.apiError(rq, err, nil)
		return
	}
	var res *vdibroker.FeedResource
	for i := range feed.Resources {
		if feed.Resources[i].ID == id {
			res = &feed.Resources[i]
		}
	}
	who := rq.api.who
	if who == nil {
		kind, tokenID, _ := strings.Cut(rq.sess.Principal, ":")
		who = &vdibroker.Principal{Kind: kind, TokenID: tokenID, Subject: feed.User, Role: rq.sess.Role}
	}
	paid := false
	if p.cfg.SpendWrite != nil {
		// Past her write budget (R-SEC): nothing kept, nothing audited,
		// as the API would refuse the launch's connect. Else the launch's
		// one is spent here, before it is kept, not by its connect, which
		// runs after the answer: another launch of hers meanwhile finds it
		// spent.
		if d := p.cfg.SpendWrite(who); d > 0 {
			rq.w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(d.Seconds()))))
			p.userError(rq, http.StatusTooManyRequests, "error.tooFast")
			return
		}
		paid = true
	}
	if res == nil {
		// Audited as a refused launch (R-U7): a signed-in user asking for
		// what her feed does not offer is worth knowing about.
		p.audit(ctx, vdibroker.FeedResource{ID: id}, who, ratelimit.ClientAddr(rq.r), rq.api.requestID, nil,
			vdibroker.Errorf(vdibroker.ENotFound, "resource %q is not in %s's feed", id, feed.User), p.clock.Now())
		// With the reference of that entry: most often her assignment
		// was taken away since her page was shown, which her helpdesk
		// finds by it (audit list --request-id).
		msg := rq.lang.T("error.badResource")
		if rq.api.requestID != "" {
			msg += " " + rq.lang.T("launch.reference", verbatim(rq.api.requestID))
		}
		p.signedInError(rq.w, rq.r, rq.lang, rq.sess, http.StatusNotFound, msg)
		return
	}
	now := p.clock.Now()
	secret := webguard.Secret(p.rand)
	l := &vdibroker.PortalLaunch{IDHash: vdibroker.HashSecret(secret), Owner: owner(rq), Name: res.FriendlyName,
		State: launchWaiting, CreateTime: now, ExpireTime: now.Add(p.cfg.MaxWait + launchTTL)}
	if err := p.cfg.Launches.CreatePortalLaunch(ctx, l, p.cfg.MaxLaunchesPerSession, p.cfg.MaxLaunches, now); err != nil {
		if vdibroker.ErrorCode(err) == vdibroker.ETooManyRequests {
			rq.w.Header().Set("Retry-After", "10")
			p.userError(rq, http.StatusTooManyRequests, "error.launches")
			return
		}
		p.storeError(rq, "keep a launch", err)
		return
	}
	p.wg.Add(1)
	go p.run(secret, l, rq.api, *res, connectBody(*res, want), who, ratelimit.ClientAddr(rq.r), paid)
	// The launch page's Back leads to her page with the sessions her
	// form carried as logging off still so (R-U3).
	to := Prefix + "launches/" + secret
	if off := loggingOff(rq.r.PostForm["off"]); len(off) > 0 {
		to += "?" + url.Values{"off": off}.Encode()
	}
	http.Redirect(rq.w, rq.r, to, http.StatusSeeOther)
}

// sessionOfForm is the session a launch's form names (its Reconnect's
// row: session, pool, and pod when another pod's), nil when none; an
// InvalidArgument error when one is named but malformed, as the API
// would refuse it.
func sessionOfForm(r *http.Request) (*vdibroker.SessionRef, error) {
	id := r.PostFormValue("session")
	if id == "" {
		return nil, nil
	}
	want := &vdibroker.SessionRef{Pod: r.PostFormValue("pod"), HostPool: r.PostFormValue("pool"), ID: id}
	if err := federation.ValidateSessionRef("session", want); err != nil {
		return nil, err
	}
	return want, nil
}

// connectBody is the body of res's connect, naming the session want
// (nil: none) where its connect takes one: a global entitlement's
// (session, R-G1), a pool's desktop of the session's pool in this pod
// (sessionId, R-C1). An application group's connect takes none.
func connectBody(res vdibroker.FeedResource, want *vdibroker.SessionRef) any {
	body := map[string]any{}
	for k, v := range res.ConnectBody {
		body[k] = v
	}
	switch {
	case want == nil:
		return res.ConnectBody
	case res.GlobalEntitlement != "":
		body["session"] = want
	case res.Kind == vdibroker.FeedDesktop && want.Pod == "" && want.HostPool == res.HostPool:
		body["sessionId"] = want.ID
	default:
		return res.ConnectBody
	}
	return body
}

// storeError answers a signed-in request the database failed (503): the
// user may try again; the log says why.
func (p *Portal) storeError(rq *request, what string, err error) {
	p.log.ErrorContext(rq.r.Context(), "portal: "+what, "err", err)
	rq.w.Header().Set("Retry-After", "5")
	p.userError(rq, http.StatusServiceUnavailable, "error.unavailable")
}

// run connects for launch l (whose id is secret) as api's user, held up
// to MaxWait while a host starts (a global entitlement's connect is not
// held), and stores its progress and answer for every replica; the
// launch is recorded in the audit trail (R-U7). paid: the launch spent
// her write budget's one, which its connect does not spend again.
func (p *Portal) run(secret string, l *vdibroker.PortalLaunch, api *caller, res vdibroker.FeedResource, body any, who *vdibroker.Principal, addr string, paid bool) {
	defer p.wg.Done()
	ctx, cancel := context.WithTimeout(p.ctx, p.cfg.MaxWait+time.Minute)
	defer cancel()
	store := context.WithoutCancel(ctx)
	// The held connect tells its progress to the observer, which must not
	// block (vdibroker.WithWaitObserver): the latest event waits in
	// progress for the goroutine that stores it.
	progress := make(chan vdibroker.WaitEvent, 1)
	stored := make(chan struct{})
	go func() {
		defer close(stored)
		shown := *l
		for e := range progress {
			// Waiting: held for a starting host; else decided again, which
			// may find the host still starting (and waits on, untold).
			shown.Starting, shown.Until = true, e.Until
			if e.Host != "" {
				shown.Host = e.Host
			}
			if err := p.cfg.Launches.UpdatePortalLaunch(store, &shown); err != nil {
				p.log.Warn("portal: a launch's progress", "err", err)
			}
		}
	}()
	ctx = vdibroker.WithWaitObserver(ctx, func(e vdibroker.WaitEvent) {
		for {
			select {
			case progress <- e:
				return
			default:
				select {
				case old := <-progress: // an older event, not stored yet: the newer wins
					if e.Host == "" {
						e.Host = old.Host // but the host it named stays named
					}
				default:
				}
			}
		}
	})
	path := res.ConnectURL
	if res.GlobalEntitlement == "" {
		path += "?wait=" + strconv.Itoa(int(p.cfg.MaxWait/time.Second))
	}
	var ans vdibroker.ConnectResponse
	connect := ctx
	if paid {
		connect = vdibroker.WithWritePaid(ctx)
	}
	err := api.do(connect, http.MethodPost, path, body, &ans)
	close(progress)
	<-stored
	now := p.clock.Now()
	l.ExpireTime = now.Add(launchTTL)
	if err != nil {
		l.State, l.Message = launchFailed, failure(err, api.requestID)
		if ra := vdibroker.ErrorRetryAfter(err); ra > 0 {
			// The answer's wait (its Retry-After), which the page
			// says in her words (launchWait); an older replica reads
			// no Until of a failed launch.
			l.Until = now.Add(ra)
		}
		// The connect's own message, which the user is not shown, by the
		// reference she is: the audit entry of a refusal is bounded per
		// user (RecordRefusal), and the API's access line has no message.
		p.log.Info("portal: a launch failed", "request_id", api.requestID, "user", who.Subject, "resource", res.ID,
			"code", vdibroker.ErrorCode(err), "err", vdibroker.ErrorMessage(err))
	} else {
		l.State, l.Host = launchReady, ans.SessionHost
		l.Sealed, err = webguard.Seal(secret, fileInfo, []byte(ans.RDPFile), []byte(l.Owner))
		if err != nil {
			l.State, l.Message = launchFailed, failure(err, api.requestID)
		}
	}
	// Recorded before the user can see the answer (R-U7): the audit
	// entry of a launch she was shown exists, as the API's are written
	// before they answer.
	p.audit(store, res, who, addr, api.requestID, &ans, err, now)
	if uerr := p.cfg.Launches.UpdatePortalLaunch(store, l); uerr != nil {
		p.log.Error("portal: keep a launch's answer", "err", uerr)
	}
}

// audit records a launch: who opened what, and the session it got or
// why not. A refused one goes to the bounded refusal audit
// (Auditor.RecordRefusal), as the API's refusals of the same user do.
func (p *Portal) audit(ctx context.Context, res vdibroker.FeedResource, who *vdibroker.Principal, addr, requestID string, ans *vdibroker.ConnectResponse, err error, now time.Time) {
	if p.cfg.Audit == nil {
		return
	}
	target := strings.TrimPrefix(res.ConnectURL, "/api/v1/")
	if target == "" {
		target = "portal/resources/" + res.ID // none in the feed
	}
	e := &vdibroker.AuditEntry{Time: now.UTC(), Principal: who.Audit(), RemoteAddr: addr, RequestID: requestID, Action: "portal.launch",
		Target: target, HostPool: res.HostPool, Outcome: vdibroker.AuditOK}
	if err != nil {
		e.Outcome, e.Error = vdibroker.AuditRefused, vdibroker.Cut(vdibroker.ErrorCode(err)+": "+vdibroker.ErrorMessage(err), vdibroker.MaxAuditField)
	} else {
		e.HostPool = ans.HostPool
		e.After, _ = json.Marshal(map[string]string{"resource": res.ID, "sessionId": ans.SessionID, "sessionHost": ans.SessionHost})
	}
	e.Bound()
	var aerr error
	if err != nil {
		_, aerr = p.cfg.Audit.RecordRefusal(ctx, e)
	} else {
		aerr = p.cfg.Audit.AppendAudit(ctx, e)
	}
	if aerr != nil {
		p.log.Error("portal: audit a launch", "err", aerr)
	}
}

// failure is what a failed launch keeps of why: the error's code, and
// its reason after a colon when it has one, which the page says in the
// user's words (failureKeys, reasonKeys), and the request id her
// helpdesk finds the refusal's audit entry and log lines by. The error's
// own message is the administrator's (hosts, limits, pools) and is only
// in those. (An older replica reads "code:reason" as a code it has no
// words for: "could not be opened", and to tell her helpdesk.)
func failure(err error, requestID string) string {
	code := vdibroker.ErrorCode(err)
	if r := vdibroker.ErrorReason(err); r != "" {
		code += ":" + r
	}
	return code + " " + requestID
}

// requestIDShape is what a failed launch's reference may look like: a
// request id, never words.
var requestIDShape = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)

// failureKeys are the messages of a failed launch by the error's code;
// any other is launch.failedOther.
var failureKeys = map[string]string{
	vdibroker.ENoCapacity:   "launch.failedNoCapacity",
	vdibroker.EHostStarting: "launch.failedStarting",
	vdibroker.ENotEntitled:  "launch.failedNotEntitled",
	vdibroker.EPermission:   "launch.failedNotEntitled",
	vdibroker.ENotAssigned:  "launch.failedNotAssigned",
	// R-E12: no host where the application is published can run it.
	vdibroker.ERemoteAppUnsupported: "launch.failedRemoteApp",
	vdibroker.ENotFound:             "launch.failedGone",
	vdibroker.EStoreUnavailable:     "launch.failedUnavailable",
	vdibroker.ETooManyRequests:      "launch.failedUnavailable",
}

// reasonKeys are the messages of a failed launch by the error's reason,
// before its code's (failureKeys).
var reasonKeys = map[string]string{
	// R-A4: her own desktop's start timed out and its agent is silent
	// (it did not start, or has shut down); no connect of hers starts it
	// again, so she is not told to try again but to ask her helpdesk.
	vdibroker.ReasonStartByAdministrator: "launch.failedHelpdesk",
	// R-A4: her own desktop's agent said that its machine goes down (a
	// restart or a shutdown from within): not the pool's capacity, and
	// no other host is right for her. She is told so and to try again,
	// and to tell her helpdesk only if it does not come back.
	vdibroker.ReasonDesktopGoingDown: "launch.failedGoingDown",
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

func (p *Portal) view(secret string, l *vdibroker.PortalLaunch, lg *lang, now time.Time) launchView {
	v := launchView{State: l.State}
	switch l.State {
	case launchReady:
		v.Title, v.Message, v.Percent = lg.T("launch.ready", l.Name), lg.T("launch.readyHint"), 100
		v.File = Prefix + "launches/" + secret + "/file"
		if p.throughGateway(secret, l) {
			// Opened twice, or the next morning, the file is refused by
			// the gateway with an RDP client's error: said before she
			// keeps it (R-GW1).
			v.Message += " " + lg.T("launch.gatewayOnce", max(1, int(p.cfg.GatewayTokenTTL/time.Minute)))
		}
	case launchFailed:
		code, ref, _ := strings.Cut(l.Message, " ")
		code, reason, _ := strings.Cut(code, ":")
		key, ok := reasonKeys[reason]
		if !ok {
			key, ok = failureKeys[code]
		}
		if !ok {
			key = "launch.failedOther"
		}
		v.Title, v.Message = lg.T("error.title"), lg.T(key, l.Name)
		if wait := launchWait(l); wait > 0 {
			// The wait its answer gave, not a guess (R-A4): a host
			// starting, or a Personal user's own desktop shutting down or
			// restarting (until its machine is down).
			switch {
			case reason == vdibroker.ReasonDesktopGoingDown:
				v.Message = lg.T("launch.goingDownFor", l.Name) + " " + tryAgain(lg, wait) + " " + lg.T("launch.ifNotBack")
			case code == vdibroker.EHostStarting:
				v.Message = lg.T("launch.failedStartingFor", l.Name) + " " + tryAgain(lg, wait)
			case code == vdibroker.ENoCapacity:
				v.Message = lg.T("launch.noCapacityFor", l.Name) + " " + tryAgain(lg, wait) + " " + lg.T("launch.keepsHappening")
			}
		}
		if requestIDShape.MatchString(ref) {
			// Not a launch an older replica stored, whose Message was
			// the connect's own words.
			v.Message += " " + lg.T("launch.reference", verbatim(ref))
		}
	default:
		v.Title, v.Message = lg.T("launch.preparing", l.Name), lg.T("launch.finding")
		if l.Starting {
			host := l.Host
			if host == "" {
				host = l.Name
			}
			// Named by what she opened: an application's pool starts
			// hosts too, and "your desktop" is not what she asked for.
			v.Title, v.Message = lg.T("launch.starting", l.Name), lg.T("launch.startingOn", host)
			if s := int(now.Sub(l.CreateTime) / time.Second); s > 0 {
				v.Waited = lg.T("launch.waited", s) // not "Waiting for 0 seconds"
			}
			if total := l.Until.Sub(l.CreateTime); total > 0 {
				v.Percent = min(99, int(100*now.Sub(l.CreateTime)/total))
			}
		}
	}
	return v
}

// launchWait is the wait failed launch l's answer gave (its Retry-After,
// kept as Until from when it ended: ExpireTime is launchTTL after that);
// 0 when it gave none, or an older replica stored it.
func launchWait(l *vdibroker.PortalLaunch) time.Duration {
	if l.Until.IsZero() {
		return 0
	}
	return max(l.Until.Sub(l.ExpireTime.Add(-launchTTL)), 0)
}

// tryAgain says wait in lg's words: whole seconds under a minute (a
// Retry-After is whole seconds), else minutes rounded up, so that she
// is not told to come back before the broker said to (90 s: 2 minutes).
func tryAgain(lg *lang, wait time.Duration) string {
	s := int((wait + time.Second - 1) / time.Second)
	if s < 60 {
		return lg.T("launch.tryAgainSeconds", s)
	}
	return lg.T("launch.tryAgainMinutes", (s+59)/60)
}

// throughGateway reports whether ready launch l's file carries an RD
// gateway access token (its pool's connects go through a gateway), read
// from the file itself, sealed under secret.
func (p *Portal) throughGateway(secret string, l *vdibroker.PortalLaunch) bool {
	rdp, err := webguard.Open(secret, fileInfo, l.Sealed, []byte(l.Owner))
	if err != nil {
		return false // the file's own answer says why (launch.gone)
	}
	for line := range strings.Lines(string(rdp)) {
		if strings.HasPrefix(strings.ToLower(line), gatewayTokenLine) {
			return true
		}
	}
	return false
}

// find returns the launch of the request's path if this sign-in made it
// and it has not expired; nil when not, an error when the database
// failed.
func (p *Portal) find(rq *request, now time.Time) (string, *vdibroker.PortalLaunch, error) {
	secret := rq.r.PathValue("id")
	l, err := p.cfg.Launches.PortalLaunch(rq.r.Context(), vdibroker.HashSecret(secret), owner(rq), now)
	if vdibroker.ErrorCode(err) == vdibroker.ENotFound {
		return secret, nil, nil
	}
	return secret, l, err
}

// launchPage is the launch's page: its state now, and the script that
// polls the status and fetches the file.
func (p *Portal) launchPage(rq *request) {
	now := p.clock.Now()
	secret, l, err := p.find(rq, now)
	switch {
	case err != nil:
		p.storeError(rq, "read a launch", err)
	case l == nil:
		p.userError(rq, http.StatusNotFound, "launch.gone")
	default:
		v := p.view(secret, l, rq.lang, now)
		p.render(rq.w, rq.r, http.StatusOK, "launch", rq.lang, map[string]any{"Launch": v, "Title": v.Title,
			"Status": Prefix + "launches/" + secret + "/status", "Back": homeWith(rq.r.URL.Query()["off"]), "CSRF": rq.sess.CSRF, "SignedIn": true})
	}
}

// status is the launch's state as JSON (launchView). A database failure
// answers 503 and no JSON: the page's script polls again later.
func (p *Portal) status(rq *request) {
	now := p.clock.Now()
	secret, l, err := p.find(rq, now)
	if err != nil {
		p.storeError(rq, "read a launch", err)
		return
	}
	rq.w.Header().Set("Content-Type", "application/json")
	if l == nil {
		rq.w.WriteHeader(http.StatusNotFound)
		json.NewEncoder(rq.w).Encode(launchView{State: "gone", Message: rq.lang.T("launch.gone")})
		return
	}
	json.NewEncoder(rq.w).Encode(p.view(secret, l, rq.lang, now))
}

// file hands the launch's .rdp file, once: the row is taken from the
// database, so of two replicas asked at once one hands it. A HEAD (which
// the mux sends to a GET's handler: a link checker's, a download
// manager's) is 405 with Allow: GET and takes nothing: its answer has no
// body, so the file it took would be lost to her.
func (p *Portal) file(rq *request) {
	if rq.r.Method != http.MethodGet {
		rq.w.Header().Set("Allow", http.MethodGet)
		rq.w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	secret := rq.r.PathValue("id")
	now := p.clock.Now()
	l, err := p.cfg.Launches.TakePortalLaunch(rq.r.Context(), vdibroker.HashSecret(secret), owner(rq), now)
	if vdibroker.ErrorCode(err) == vdibroker.ENotFound {
		_, waiting, ferr := p.find(rq, now)
		switch {
		case ferr != nil:
			p.storeError(rq, "read a launch", ferr)
		case waiting != nil:
			http.Redirect(rq.w, rq.r, Prefix+"launches/"+secret, http.StatusSeeOther)
		default:
			p.userError(rq, http.StatusNotFound, "launch.gone")
		}
		return
	}
	if err != nil {
		p.storeError(rq, "take a launch's file", err)
		return
	}
	rdp, err := webguard.Open(secret, fileInfo, l.Sealed, []byte(l.Owner))
	if err != nil {
		p.log.ErrorContext(rq.r.Context(), "portal: a launch's file does not open with its id", "err", err)
		p.userError(rq, http.StatusNotFound, "launch.gone")
		return
	}
	rq.w.Header().Set("Content-Type", "application/x-rdp")
	rq.w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": fileName(l.Name)}))
	rq.w.Write(rdp)
}

// fileName is a resource's friendly name as an .rdp file's name the
// user recognises: letters, digits, spaces, '-', '_', '.', parentheses,
// commas, apostrophes and '&' kept (any script; all are valid in a file
// name on Windows, macOS and Linux, and "Office (Berlin)", "Bob's
// desktop" and "Sales & Marketing" are usual friendly names), everything
// else '_', at most 64 characters, never empty or hidden.
func fileName(friendly string) string {
	var b strings.Builder
	n := 0
	for _, r := range friendly {
		if n == 64 {
			break
		}
		switch {
		case unicode.IsLetter(r), unicode.IsDigit(r), strings.ContainsRune("-_.(),'&", r):
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
