package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/federation"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// userSessionColumns is the table of a user session (SPEC §9).
var userSessionColumns = []column{
	{"Id", "id"},
	{"User", "user"},
	{"SessionHost", "sessionHost"},
	{"State", "state"},
	{"CreateTime", "createTime"},
}

func newUserSessionCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "usersession",
		Aliases: []string{"user-session"},
		Short:   "List user sessions, log them off, disconnect them, send messages",
		Long: `List user sessions and act on them. Log off, disconnect and messages are
queued for the session host's agent, which carries them out on its next heartbeat.
Name the session with --id, or with --user for that user's open session(s) in the pool.
A session in another pod of a federation (as federation sessions lists it) is
logged off or disconnected with --pod, --user and --id: the pod at --server asks
that pod, which does it as its own API does (R-U3). A User token may leave out
--user there: its own user, the only one it acts for (whoami).
With --host-pool, a User token lists its own open sessions in the pool only.`,
	}
	a := addAdminFlags(cmd)
	cmd.AddCommand(
		newUserSessionListCmd(a),
		newUserSessionActionCmd(a, "logoff", "Log off a user session", nil),
		newUserSessionActionCmd(a, "disconnect", "Disconnect a user session (it stays Disconnected, the user can reconnect)", nil),
		newUserSessionActionCmd(a, "send-message", "Send a message to the user of a session", []string{"message"}),
	)
	a.completeNames(cmd, "")
	a.suggestNames(cmd, kindNone)
	return cmd
}

// userSessionsOfUserColumns is the table of a user's sessions in every
// pool: the pool each is in, which the --id of logoff and the others needs.
var userSessionsOfUserColumns = []column{
	{"Id", "id"},
	{"User", "user"},
	{"HostPool", "hostPool"},
	{"SessionHost", "sessionHost"},
	{"State", "state"},
	{"CreateTime", "createTime"},
}

func newUserSessionListCmd(a *admin) *cobra.Command {
	var pool, user, state, host string
	cmd := &cobra.Command{
		Use:   "list (--host-pool POOL [--user U] [--state S] [--session-host H] | [--user U])",
		Short: "List user sessions (not LoggedOff ones unless --state LoggedOff); --user alone: the user's open sessions in every pool",
		Long: `List the sessions of a host pool (not LoggedOff ones unless --state LoggedOff),
or, with --user and no --host-pool, the user's open sessions in every pool the
token sees (the name in any spelling, R-U3), each with its pool: where a
helpdesk looks first when a user calls. With neither, a User token lists its
own user's open sessions, the only ones it may (whoami); with --host-pool, its
own open sessions in that pool (it may not read the pool's list).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// --user "" of an unset variable is no user: said, not taken
			// for no filter, which listed every user's sessions.
			if err := emptyFlag(cmd, "user"); err != nil {
				return err
			}
			if pool == "" && (state != "" || host != "") {
				return usageError{errors.New("--state and --session-host need --host-pool; --user alone lists the user's open sessions in every pool")}
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			if pool == "" {
				user, who, err := a.tokenUser(cmd, c, user)
				if err != nil {
					return err
				}
				if user == "" {
					return usageError{fmt.Errorf("give --host-pool, or --user for the user's open sessions in every pool: only a User token lists its own without them (this token's role is %s)", who.Role)}
				}
				sessions, err := c.UserSessions(cmd.Context(), user)
				if err != nil {
					return fail(err)
				}
				return a.show(cmd, sessions, userSessionsOfUserColumns)
			}
			// whoami is this command's first request and is needed: the
			// token's role decides which list to read (a User token may
			// not read the pool's, and a read the broker refuses is
			// audited as a request she never made, R-SEC), and a User
			// token's subject is her name when --user is left out. No
			// earlier call of the command knows either, so a User
			// token's list is whoami and her sessions, two requests.
			who, err := a.whoAmI(cmd.Context(), c)
			if err != nil {
				return err
			}
			var sessions []*vdibroker.UserSession
			if who.Role == vdibroker.RoleUser {
				sessions, err = ownSessionsInPool(cmd, c, who, vhttp.SessionQuery{User: user, State: state, SessionHost: host}, pool)
			} else {
				sessions, err = c.ListUserSessions(cmd.Context(), pool, vhttp.SessionQuery{User: user, State: state, SessionHost: host})
			}
			if err != nil {
				return fail(err)
			}
			return a.show(cmd, sessions, userSessionColumns)
		},
	}
	f := cmd.Flags()
	poolNameVar(f, &pool, "host-pool", "", "host pool name (without it, --user lists the user's open sessions in every pool)")
	f.StringVar(&user, "user", "", "only this user's sessions")
	f.Var(newEnum(&state, "", vdibroker.StatePending, vdibroker.StateActive, vdibroker.StateDisconnected, vdibroker.StateLoggedOff), "state", "only sessions in this state: Pending, Active, Disconnected or LoggedOff")
	hostNameVar(f, &host, "session-host", "", "only sessions on this session host")
	_ = cmd.RegisterFlagCompletionFunc("state", fixedCompletion(vdibroker.StatePending, vdibroker.StateActive, vdibroker.StateDisconnected, vdibroker.StateLoggedOff))
	return cmd
}

// ownSessionsInPool is usersession list --host-pool POOL for a User
// token (who), which may not read a pool's list (R-SEC): her own open
// sessions, as the broker lists them to her (GET /users/{user}/sessions,
// R-U3: it answers an end user about herself only, the name in any
// spelling, R-E5), those of them in pool and of q's state and host. q's
// user is hers when --user is left out; another user's name is the
// broker's to refuse, as it is. A pool she has no session in, or that
// does not exist, lists nothing: her token reads no pool, so she learns
// no more of the pools than her sessions tell. Her LoggedOff sessions
// are not among those she may read: asked for, she is told so rather
// than shown none.
func ownSessionsInPool(cmd *cobra.Command, c *vhttp.Client, who *vhttp.WhoAmI, q vhttp.SessionQuery, pool string) ([]*vdibroker.UserSession, error) {
	if q.State == vdibroker.StateLoggedOff {
		return nil, errors.New("--state LoggedOff: a User token lists its own open sessions only (Pending, Active, Disconnected); ended ones are for an administrator to read")
	}
	if !cmd.Flags().Changed("user") {
		q.User = who.Subject
	}
	mine, err := c.UserSessions(cmd.Context(), q.User)
	if err != nil {
		return nil, err
	}
	sessions := []*vdibroker.UserSession{}
	for _, s := range mine {
		if s.HostPool == pool && (q.State == "" || s.State == q.State) && (q.SessionHost == "" || s.SessionHost == q.SessionHost) {
			sessions = append(sessions, s)
		}
	}
	return sessions, nil
}

// commandColumns is the table of a command queued for a host's agent.
var commandColumns = []column{
	{"Id", "id"},
	{"Type", "type"},
	{"SessionId", "sessionId"},
	{"User", "user"},
	{"SessionHost", "sessionHost"},
	{"State", "state"},
}

// newUserSessionActionCmd builds logoff, disconnect and send-message: the
// same selection of sessions (--id, or --user) and one queued command each.
func newUserSessionActionCmd(a *admin, name, short string, required []string) *cobra.Command {
	var pool, id, user, message, pod string
	global := name == "logoff" || name == "disconnect"
	use := name + " --host-pool POOL (--id ID | --user U)"
	if global {
		use = name + " (--host-pool POOL (--id ID | --user U) | --pod POD [--user U] --id ID)"
	}
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// --id "$ID" of an unset variable names no session: said as
			// such, not as "give exactly one of --id and --user".
			if err := emptyFlag(cmd, "id", "user", "pod"); err != nil {
				return err
			}
			if pod != "" {
				const named = "a session in another pod is named by --pod, --user and --id (as federation sessions lists it)"
				switch {
				case pool != "":
					return usageError{errors.New("--pod and --host-pool do not go together: " + named)}
				case id == "":
					return usageError{errors.New("--pod needs --id: " + named)}
				}
				return globalSessionAction(cmd, a, name, user, pod, id)
			}
			if pool == "" {
				return usageError{errors.New("give --host-pool (or --pod, --user and --id for a session in another pod)")}
			}
			if (id == "") == (user == "") {
				return usageError{errors.New("give exactly one of --id and --user")}
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			ids := []string{id}
			if user != "" {
				if ids, err = a.openSessionIDs(cmd.Context(), c, pool, user); err != nil {
					return fail(err)
				}
				if len(ids) == 0 {
					return fmt.Errorf("user %q has no open session in host pool %q", user, pool)
				}
			}
			cmds := []*vdibroker.Command{}
			var warnings []string
			for _, sid := range ids {
				var q *vdibroker.Command
				switch name {
				case "logoff":
					q, err = c.Logoff(cmd.Context(), pool, sid)
				case "disconnect":
					q, err = c.Disconnect(cmd.Context(), pool, sid)
				case "send-message":
					q, err = c.SendMessage(cmd.Context(), pool, sid, message)
				}
				if err != nil {
					return fail(err)
				}
				cmds = append(cmds, q)
				for _, w := range q.Warnings {
					if !slices.Contains(warnings, w) { // two sessions of a user on one host
						warnings = append(warnings, w)
					}
				}
			}
			// R-S4: queued for a host that cannot carry it out now.
			printWarnings(cmd, warnings)
			return a.queued(cmd, cmds, "")
		},
	}
	f := cmd.Flags()
	poolNameVar(f, &pool, "host-pool", "", "host pool name")
	f.StringVar(&id, "id", "", "user session id")
	f.StringVar(&user, "user", "", "act on this user's open session(s) in the pool")
	if name == "send-message" {
		textVar(f, &message, "message", vdibroker.MaxMessageLen, fmt.Sprintf("the message text, at most %d characters", vdibroker.MaxMessageLen))
		required = append(required, "host-pool")
	}
	if global {
		f.Var(&nameValue{&pod, federation.MinPodNameLen, federation.MaxPodNameLen}, "pod", "another pod of the federation, whose session of --user with --id this pod asks it to act on")
	}
	if len(required) > 0 {
		requireFlags(cmd, required...)
	}
	return cmd
}

// globalSessionAction logs off or disconnects user's session id in
// another pod of the federation through the pod at --server (R-U3): the
// queued command, with the warning of a host that cannot carry it out now.
//
// Without --user, a User token acts for its own user (tokenUser), the
// only one whose sessions it may log off or disconnect (R-U3), as
// connect does; any other token names the user, the session's pod's
// key to it: a usage error saying so with the token's role.
func globalSessionAction(cmd *cobra.Command, a *admin, name, user, pod, id string) error {
	c, err := a.client()
	if err != nil {
		return err
	}
	user, who, err := a.tokenUser(cmd, c, user)
	if err != nil {
		return err
	}
	if user == "" {
		return usageError{fmt.Errorf("--pod needs --user with this token (role %s): a session in another pod is named by --pod, --user and --id (as federation sessions lists it); only a User token leaves out --user, for its own user", who.Role)}
	}
	var q *vdibroker.Command
	if name == "logoff" {
		q, err = c.GlobalLogoff(cmd.Context(), user, pod, id)
	} else {
		q, err = c.GlobalDisconnect(cmd.Context(), user, pod, id)
	}
	if err != nil {
		return fail(err)
	}
	printWarnings(cmd, q.Warnings)
	return a.queued(cmd, []*vdibroker.Command{q}, pod)
}

// queued prints what a logoff, disconnect or send-message did: with
// --output or --query the queued commands, as every command that
// changes something; without, one line a session saying what was
// queued where, so that an admin who logs a user off or messages her is
// not left with no answer at all (a silent success read as nothing
// done). pod names another pod of the federation ("": this broker's own
// session).
func (a *admin) queued(cmd *cobra.Command, cmds []*vdibroker.Command, pod string) error {
	if a.out.Format != "" || a.out.Query != "" {
		return a.result(cmd, cmds, commandColumns)
	}
	w := cmd.OutOrStdout()
	for _, q := range cmds {
		if _, err := fmt.Fprintln(w, queuedLine(q, pod)); err != nil {
			return err
		}
	}
	return nil
}

// queuedLine is queued's line for q: "queued logoff of session ID of
// USER on HOST (pool POOL): its agent runs it on its next heartbeat"
// (R-S4), "queued message to session ID ...: its agent shows it on its
// next heartbeat" for a message, the names escaped for the terminal. A
// logoff whose answer says the session ended at once (a Pending session
// its agent never reported) says so instead: nothing waits for the
// agent but the precaution.
func queuedLine(q *vdibroker.Command, pod string) string {
	var b strings.Builder
	message := q.Type == vdibroker.CommandSendMessage
	switch {
	case q.SessionEnded:
		b.WriteString("logged off session " + escapeTerminal(q.SessionID, ""))
	case message:
		b.WriteString("queued message to session " + escapeTerminal(q.SessionID, ""))
	default:
		b.WriteString("queued " + strings.ToLower(q.Type) + " of session " + escapeTerminal(q.SessionID, ""))
	}
	if q.User != "" {
		b.WriteString(" of " + escapeTerminal(q.User, ""))
	}
	if q.SessionHost != "" {
		b.WriteString(" on " + escapeTerminal(q.SessionHost, ""))
	}
	var where []string
	if q.HostPool != "" {
		where = append(where, "pool "+escapeTerminal(q.HostPool, ""))
	}
	if pod != "" {
		where = append(where, "pod "+escapeTerminal(pod, ""))
	}
	if len(where) > 0 {
		b.WriteString(" (" + strings.Join(where, ", ") + ")")
	}
	if q.SessionEnded {
		b.WriteString(": it ended now, as its agent had not reported it yet; a logoff stays queued in case its logon is under way")
		return b.String()
	}
	if message {
		b.WriteString(": its agent shows it on its next heartbeat")
		return b.String()
	}
	b.WriteString(": its agent runs it on its next heartbeat")
	return b.String()
}

// openSessionIDs lists the ids of a user's open sessions in a pool: the
// pool's list of them, or, for a token that may not read it (an end
// user's, R-U3), the user's sessions in every pool (GET
// /users/{user}/sessions, which she may read of herself) that are in the
// pool, so that her User token's "--user ME" logs hers off as "--id"
// does. She is sent no read the broker would refuse (and audit as a
// request she never made); any other caller reads the pool's list, so a
// pool that does not exist is said so (404, with the names near it),
// not taken for one without the user's session.
func (a *admin) openSessionIDs(ctx context.Context, c *vhttp.Client, pool, user string) ([]string, error) {
	read, err := a.tokenMayRead(ctx, c)
	if err != nil {
		return nil, err
	}
	var sessions []*vdibroker.UserSession
	if read {
		sessions, err = c.ListUserSessions(ctx, pool, vhttp.SessionQuery{User: user})
	} else {
		sessions, err = c.UserSessions(ctx, user)
	}
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, s := range sessions {
		if read || s.HostPool == pool {
			ids = append(ids, s.ID)
		}
	}
	return ids, nil
}
