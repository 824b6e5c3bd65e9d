package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/spf13/cobra"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/console"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// The federation commands (SPEC §7): apply the federation
// document to every pod it lists, show what a pod holds, list a user's
// sessions across the pods, and list or show global entitlements with
// their members' loads.

var applyColumns = []column{
	{"Pod", "pod"},
	{"URL", "url"},
	{"Generation", "generation"},
	{"Result", "result"},
}

var peerColumns = []column{
	{"Pod", "pod"},
	{"Site", "site"},
	// A peer whose call was still under way when --peer-wait ran out
	// (askedAt): its health is the call's before it (R-G5).
	{"Health", "askedAt && join('', ['not answering (asked ', askedAt, ')']) || health"},
	{"Generation", "generation"},
	{"GenerationMismatch", "generationMismatch"},
	{"LastContact", "lastContact"},
}

var globalEntitlementColumns = []column{
	{"Name", "name"},
	{"Kind", "kind || 'Desktop'"},
	{"Scope", "scope"},
	{"SessionDistribution", "sessionDistribution"},
	{"UseHomeSite", "useHomeSite"},
	{"Members", "length(members)"},
}

var memberColumns = []column{
	{"Pod", "pod"},
	{"Site", "site"},
	{"HostPool", "hostPool"},
	{"Load", "load"},
	{"Sessions", "facts.sessions"},
	{"Hosts", "facts.hosts"},
	{"HasCapacity", "facts.hasCapacity"},
	{"Error", "error"},
}

func init() { rootCmd.AddCommand(newFederationCmd(), newGlobalEntitlementCmd()) }

func newFederationCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "federation",
		Short: "Apply and show the federation document (sites, pods, global entitlements)",
	}
	a := addAdminFlags(cmd)
	var file string
	apply := &cobra.Command{
		Use:   "apply -f FILE",
		Short: "Send the federation document (YAML or JSON) to every pod it lists and report per pod",
		Long: "Send the federation document to every pod it lists, at the URL the document gives it, with the\n" +
			"same --token; each pod checks it (a lower generation than the one it holds is refused) and\n" +
			"stores it in its own database. Exits 1 when any pod refused it or could not be reached.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			doc, err := readFederation(file)
			if err != nil {
				return usageError{err}
			}
			if _, err := a.client(); err != nil {
				return err
			}
			token := firstNonEmpty(a.token, os.Getenv("VDIBROKER_TOKEN"))
			rows := applyAll(cmd.Context(), doc, token)
			failed := 0
			for _, r := range rows {
				if r.Result != "applied" {
					failed++
				}
			}
			if err := a.show(cmd, rows, applyColumns); err != nil {
				return err
			}
			if failed > 0 {
				return fmt.Errorf("%d of %s did not take generation %d", failed, vdibroker.Plural(len(rows), "pod"), doc.Generation)
			}
			return nil
		},
	}
	apply.Flags().StringVarP(&file, "file", "f", "", "federation document, YAML or JSON")
	requireFlags(apply, "file")
	var showWait time.Duration
	show := &cobra.Command{
		Use:   "show",
		Short: "Show the document the pod at --server holds, with each peer's health and generation",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := peerWaitClient(a, showWait)
			if err != nil {
				return err
			}
			st, err := c.GetFederation(cmd.Context())
			if err != nil {
				return fail(err)
			}
			printWarnings(cmd, st.Warnings) // R-E9: entitlements that name nobody
			if o := a.outputFor(formatTable); o.Format == formatTable && o.Query == "" {
				fmt.Fprintf(cmd.OutOrStdout(), "Pod %s in site %s holds generation %d: %s, %s, %s\n\n",
					st.Pod, st.Site, st.Document.Generation, vdibroker.Plural(len(st.Document.Sites), "site"), vdibroker.Plural(len(st.Document.Pods), "pod"), vdibroker.Plural(len(st.Document.GlobalEntitlements), "global entitlement"))
				return a.show(cmd, st.Peers, peerColumns)
			}
			return a.show(cmd, st, nil)
		},
	}
	peerWaitFlag(show, &showWait)
	cmd.AddCommand(apply, show, newFederationSessionsCmd(a))
	return cmd
}

// federationSessionColumns is the table of federation sessions.
var federationSessionColumns = []column{
	{"Pod", "pod"},
	{"HostPool", "hostPool"},
	{"Id", "id"},
	{"SessionHost", "sessionHost"},
	{"State", "state"},
	{"CreateTime", "createTime"},
}

// newFederationSessionsCmd is `federation sessions --user U`: where a
// user's open sessions are, in this pod and the others (R-U3, R-G1), as
// an administrator looking for a user's session across the sites asks.
// A User token asks about its own user (without --user too): the pod
// lists an end user's sessions to herself, in this pod and in the member
// pools of the global entitlements that grant her (R-E9), as her portal
// shows them. It may not read the federation document (R-SEC), which
// names the pod at --server: its sessions there have no pod.
func newFederationSessionsCmd(a *admin) *cobra.Command {
	var user string
	cmd := &cobra.Command{
		Use:   "sessions [--user U]",
		Short: "List a user's open sessions in the pod at --server and in the other pods' member pools",
		Long: "List a user's open sessions in every pool of the pod at --server and in the member pools of the\n" +
			"other pods, which that pod asks as a global connect would (the user's directory pod, then the\n" +
			"pods it names). Exits 1 when a pod did not answer, after listing the sessions of the others.\n" +
			"A User token lists its own user's (--user may be left out): in the other pods, those of the global\n" +
			"entitlements that grant it; the sessions of the pod at --server have no Pod, as the token may not\n" +
			"read the federation document that names it.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			user, pod, err := a.federationSessionsUser(cmd, c, user)
			if err != nil {
				return err
			}
			local, err := c.UserSessions(ctx, user)
			if err != nil {
				return fail(err)
			}
			remote, err := c.GlobalSessions(ctx, user)
			if err != nil {
				return fail(err)
			}
			rows := make([]*vdibroker.GlobalSession, 0, len(local)+len(remote.Value))
			for _, s := range local {
				rows = append(rows, &vdibroker.GlobalSession{UserSession: *s, Pod: pod, GlobalEntitlements: []string{}, Reconnect: []string{}})
			}
			rows = append(rows, remote.Value...)
			if err := a.show(cmd, rows, federationSessionColumns); err != nil {
				return err
			}
			return unansweredPods(remote.Unanswered)
		},
	}
	cmd.Flags().StringVar(&user, "user", "", "the user (any spelling of the name; default with a User token: its own user)")
	return cmd
}

// federationSessionsUser is the user federation sessions lists and the
// name of the pod at --server for its own sessions' rows. For a User
// token: --user, or without it the token's user (tokenUser), and no pod
// name (the federation document that holds it is not hers to read);
// another user's name is refused here, as the broker would refuse it,
// with what she may do instead, and nothing is asked. Any other token
// names the user (a usage error without --user) and reads the pod's
// name from the federation document, as before.
func (a *admin) federationSessionsUser(cmd *cobra.Command, c *vhttp.Client, user string) (string, string, error) {
	named := cmd.Flags().Changed("user")
	user, who, err := a.tokenUser(cmd, c, user)
	if err != nil {
		return "", "", err
	}
	if named {
		if who, err = a.whoAmI(cmd.Context(), c); err != nil {
			return "", "", err
		}
	}
	if who.Role == vdibroker.RoleUser {
		if !vdibroker.SameUser(who.Subject, user) { // R-E5
			return "", "", fmt.Errorf("--user %q: a User token lists only its own user's sessions (%q): leave out --user", user, who.Subject)
		}
		return user, "", nil
	}
	if user == "" {
		return "", "", usageError{fmt.Errorf("--user: required with this token (role %s): only a User token lists its own user's sessions without it", who.Role)}
	}
	st, err := c.GetFederation(cmd.Context())
	if err != nil {
		return "", "", fail(err)
	}
	return user, st.Pod, nil
}

// applyRow is one pod's line in the apply report.
type applyRow struct {
	Pod        string `json:"pod"`
	URL        string `json:"url"`
	Generation int64  `json:"generation"`
	Result     string `json:"result"`
}

// applyAll sends doc to every pod it lists, in parallel, each within 30s
// (vhttp.ApplyFederation) with the operator's token; the console's
// Federation page does not: it sends the signed pod-to-pod call
// (PodClient.PutDocument), never a user's token (R-SEC).
func applyAll(ctx context.Context, doc *vdibroker.Federation, token string) []applyRow {
	rows := make([]applyRow, len(doc.Pods))
	for i, r := range vhttp.ApplyFederation(ctx, doc, doc.Pods, token, vhttp.ApplyOptions{Timeout: 30 * time.Second}) {
		rows[i] = applyRow{Pod: r.Pod.Name, URL: r.Pod.URL, Generation: doc.Generation, Result: "applied"}
		switch {
		case r.Err == nil:
		case r.Unreachable:
			// The URL is the document's, not --server's.
			rows[i].Result = "unreachable: " + r.Err.Error()
		default:
			rows[i].Result = fail(r.Err).Error()
		}
	}
	return rows
}

// readFederation reads a document, YAML or JSON, refusing unknown fields.
func readFederation(path string) (*vdibroker.Federation, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if t := bytes.TrimSpace(data); len(t) == 0 || t[0] != '{' {
		if data, err = yaml.YAMLToJSON(data); err != nil {
			return nil, fmt.Errorf("%s: not YAML or JSON: %w", path, err)
		}
	}
	var doc vdibroker.Federation
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("%s: %s", path, strings.TrimPrefix(err.Error(), "json: "))
	}
	return &doc, nil
}

func newGlobalEntitlementCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "globalentitlement",
		Aliases: []string{"global-entitlement"},
		Short:   "List and show global entitlements with their members' loads",
	}
	a := addAdminFlags(cmd)
	var listWait, showWait time.Duration
	list := &cobra.Command{
		Use:   "list",
		Short: "List the global entitlements of the pod at --server",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := peerWaitClient(a, listWait)
			if err != nil {
				return err
			}
			l, err := c.ListGlobalEntitlements(cmd.Context())
			if err != nil {
				return fail(err)
			}
			return a.show(cmd, l, globalEntitlementColumns)
		},
	}
	var name string
	show := &cobra.Command{
		Use:   "show --name NAME",
		Short: "Show a global entitlement and its members' loads as the pods report them",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := peerWaitClient(a, showWait)
			if err != nil {
				return err
			}
			ge, err := c.GetGlobalEntitlement(cmd.Context(), name)
			if err != nil {
				return fail(err)
			}
			printWarnings(cmd, ge.Warnings)
			if o := a.outputFor(formatTable); o.Format == formatTable && o.Query == "" {
				fmt.Fprintf(cmd.OutOrStdout(), "%s: %s, scope %s, sessionDistribution %s, useHomeSite %v\nentitles %s\n\n",
					ge.Name, globalEntitlementKind(ge.GlobalEntitlement), ge.Scope, ge.SessionDistribution, ge.UseHomeSite, entitledWords(ge.GlobalEntitlement))
				return a.show(cmd, ge.Members, memberColumns)
			}
			return a.show(cmd, ge, nil)
		},
	}
	show.Flags().StringVar(&name, "name", "", "global entitlement name")
	requireFlags(show, "name")
	peerWaitFlag(list, &listWait)
	peerWaitFlag(show, &showWait)
	cmd.AddCommand(list, show, newGlobalConnectCmd(a))
	a.suggestNames(cmd, kindGlobalEntitlement)
	return cmd
}

// peerWaitFlag adds --peer-wait to a read that asks the peers. Its
// default is the console's Federation page's (console.DefaultPeerWait,
// 1s): an administrator runs these commands when something is wrong,
// often a peer that is down, and a peer that answers at all answers in
// milliseconds, so the table comes at once with that peer named as not
// answering instead of after the whole --pod-timeout; 0 waits as the pod
// does without it, up to its --pod-timeout.
func peerWaitFlag(cmd *cobra.Command, d *time.Duration) {
	cmd.Flags().DurationVar(d, "peer-wait", console.DefaultPeerWait,
		fmt.Sprintf("wait at most this long (1ms..%s) for the peer pods; a peer that has not answered by then is shown as not answering (0: up to the pod's --pod-timeout)",
			vdibroker.DurationFlag(vhttp.MaxPeerWait)))
}

// peerWaitClient is a's client sending wait as peerWait, checked as the
// API checks it but named by its flag.
func peerWaitClient(a *admin, wait time.Duration) (*vhttp.Client, error) {
	if wait != 0 && (wait < time.Millisecond || wait > vhttp.MaxPeerWait) {
		return nil, usageError{fmt.Errorf("--peer-wait: must be 0 (the pod timeout) or 1ms..%s, got %s",
			vdibroker.DurationFlag(vhttp.MaxPeerWait), vdibroker.DurationFlag(wait))}
	}
	c, err := a.client()
	if err != nil {
		return nil, err
	}
	c.PeerWait = wait
	return c, nil
}

// globalEntitlementKind is what a global entitlement opens, in the
// words of its document: Desktop, or Application and its application.
func globalEntitlementKind(g vdibroker.GlobalEntitlement) string {
	if g.Kind == vdibroker.KindApplication {
		return "Application " + g.Application
	}
	return "Desktop"
}

// entitledWords says whom a global entitlement entitles (R-E9), the line
// an administrator reads after changing it (the console's Federation
// page, federation apply): all users, its users and groups, or, naming
// none, everyone.
func entitledWords(g vdibroker.GlobalEntitlement) string {
	if g.AllUsers {
		return "all users"
	}
	var parts []string
	if len(g.Users) > 0 {
		parts = append(parts, "users "+strings.Join(g.Users, ", "))
	}
	if len(g.Groups) > 0 {
		parts = append(parts, "groups "+strings.Join(g.Groups, ", "))
	}
	if len(parts) == 0 {
		return "everyone: it names no user or group (R-E9)"
	}
	return strings.Join(parts, "; ")
}

// globalConnectColumns is the table of a global connect's answer.
var globalConnectColumns = []column{
	{"Pod", "pod"},
	{"HostPool", "hostPool"},
	{"SessionId", "sessionId"},
	{"User", "user"},
	{"SessionHost", "sessionHost"},
	{"State", "state"},
	{"Reconnect", "reconnect"},
	{"DryRun", "dryRun"},
}

// newGlobalConnectCmd is `globalentitlement connect`: a user's connect
// through a global entitlement (R-G1..R-G4), as POST
// /api/v1/globalentitlements/{name}/connect, with the decision in words.
func newGlobalConnectCmd(a *admin) *cobra.Command {
	var (
		name, user, rdpFile string
		groups              []string
		dryRun              bool
	)
	cmd := &cobra.Command{
		Use:   "connect --name NAME [--user USER] [--groups G1,G2] [--dry-run] [--rdp-file PATH]",
		Short: "Connect a user through a global entitlement: which pod and pool it chose, and why",
		Long: `Connect a user through a global entitlement, as the user's client would
(POST /api/v1/globalentitlements/{name}/connect on the pod at --server):
the user's existing session in any member pool first, else a new one in
the member pool the entitlement's scope, home site and load distribution
choose (docs/federation.md). The answer names the pod and pool, and
under the table each pod of the decision, chosen or skipped and why.
--dry-run decides and stores nothing; --rdp-file writes the connection
file; --groups are the user's groups, which choose the home site and
entitle the user (a User token's own are its identity's).
` + connectUserHelp,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			if user, err = a.connectUser(cmd, c, user); err != nil {
				return err
			}
			res, err := c.GlobalConnect(cmd.Context(), name, vdibroker.GlobalConnectRequest{User: user, Groups: groups, DryRun: dryRun})
			if err != nil {
				return fail(err)
			}
			if err := writeRDPFile(rdpFile, res.RDPFile); err != nil {
				return err
			}
			o := a.outputFor(formatTable)
			if err := a.show(cmd, res, globalConnectColumns); err != nil || o.Format != formatTable || o.Query != "" || res.Decision == nil {
				return err
			}
			w := cmd.OutOrStdout()
			d := res.Decision
			// Every word of the answer is escaped as a table's cells are:
			// the pod at --server quotes what other pods answered.
			esc := func(s string) string { return escapeTerminal(s, "") }
			fmt.Fprintf(w, "\nDecision: scope %s, sessionDistribution %s, connected to pod %s, start site %s\n",
				esc(d.Scope), esc(d.SessionDistribution), esc(d.ConnectedPod), esc(d.StartSite))
			if e := d.ExistingSession; e != nil {
				fmt.Fprintf(w, "  the user's existing session in %s of pod %s (R-G1)\n", esc(e.HostPool), esc(e.Pod))
			}
			for _, p := range d.Pods {
				fmt.Fprintf(w, "  pod %s (site %s)%s\n", escapeTerminal(p.Pod, ""), escapeTerminal(p.Site, ""), decisionWords(p.Load, p.Chosen, p.Skipped))
				for _, pl := range p.Pools {
					fmt.Fprintf(w, "    %s%s\n", escapeTerminal(pl.HostPool, ""), decisionWords(pl.Load, pl.Chosen, pl.Skipped))
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&name, "name", "", "global entitlement name")
	f.StringVar(&user, "user", "", "user to connect (default with a User token: its own user)")
	f.StringSliceVar(&groups, "groups", nil, "the user's groups (not with a User token, whose groups are its own)")
	f.BoolVar(&dryRun, "dry-run", false, "compute the decision only; store nothing")
	f.StringVar(&rdpFile, "rdp-file", "", "write the .rdp connection file to this path")
	requireFlags(cmd, "name")
	return cmd
}

// decisionWords is one pod's or pool's line of a global decision:
// its load, and whether it was chosen or skipped and why.
func decisionWords(load *float64, chosen bool, skipped string) string {
	s := ""
	if load != nil {
		s += fmt.Sprintf(": load %.3g", *load)
	}
	switch {
	case chosen:
		s += ", chosen"
	case skipped != "":
		s += ", skipped: " + escapeTerminal(skipped, "")
	}
	return s
}

// unansweredPods is federation sessions' error for the pods that did not
// answer (pod name to why), nil when every pod answered.
func unansweredPods(unanswered map[string]string) error {
	if len(unanswered) == 0 {
		return nil
	}
	var pods []string
	for _, pod := range slices.Sorted(maps.Keys(unanswered)) {
		pods = append(pods, pod+" ("+unanswered[pod]+")")
	}
	if len(pods) == 1 {
		return fmt.Errorf("1 pod did not answer, its sessions are not listed: %s", pods[0])
	}
	return fmt.Errorf("%d pods did not answer, their sessions are not listed: %s", len(pods), strings.Join(pods, ", "))
}
