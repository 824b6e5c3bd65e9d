package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// The entitlement commands (R-E1..R-E10), in the style of az
// desktopvirtualization applicationgroup and application: create, update
// (only the flags given change), show, list and delete, plus an
// application's connect and what a user may use.

var applicationGroupColumns = []column{
	{"Name", "name"},
	{"HostPool", "hostPool"},
	{"ApplicationGroupType", "applicationGroupType"},
	{"FriendlyName", "friendlyName"},
	{"Users", "assignments.users"},
	{"Groups", "assignments.groups"},
	{"AllUsers", "assignments.allUsers"},
}

var applicationColumns = []column{
	{"Name", "name"},
	{"ApplicationGroup", "applicationGroup"},
	{"FilePath", "filePath"},
	{"CommandLineSetting", "commandLineSetting"},
	{"CommandLineArguments", "commandLineArguments"},
	{"FriendlyName", "friendlyName"},
	{"ShowInPortal", "showInPortal"},
}

var userEntitlementColumns = []column{
	{"Kind", "kind"},
	{"HostPool", "hostPool"},
	{"ApplicationGroup", "applicationGroup"},
	{"Application", "application"},
	{"GlobalEntitlement", "globalEntitlement"},
	{"Via", "grant.via"},
	{"Principal", "grant.principal"},
}

// updateAttempts bounds the reads and writes of one update (R-E13).
const updateAttempts = 3

// updateIfMatch runs an update's read-modify-write, whose PUT carries the
// read's ETag as If-Match, until it lands: one refused with
// PreconditionFailed (another writer changed the object in between, and
// nothing was written) reads again and applies the same flags to what is
// there now, so both writers' changes land rather than the second
// administrator being told to do it by hand; at most updateAttempts times
// in all (R-E13). Between attempts it pauses (updateBackoff): two
// commands refused at the same moment would otherwise read and write
// again in step and refuse each other again. Past the last, the error
// says the object kept changing, that nothing of this update was
// written, and what to do; show is the command that reads the object
// ("vdibroker applicationgroup show ..."). The pause ends early when ctx
// does (Ctrl-C), with ctx's error and nothing more written.
func updateIfMatch[T any](ctx context.Context, what, show string, attempt func() (T, error)) (T, error) {
	b := backoffFrom(ctx)
	for i := 1; ; i++ {
		r, err := attempt()
		if vdibroker.ErrorCode(err) != vdibroker.EPreconditionFailed {
			return r, fail(err)
		}
		if i == updateAttempts {
			return r, fail(&vdibroker.Error{Code: vdibroker.EPreconditionFailed, Message: fmt.Sprintf(
				"%s was changed by someone else while this update ran, %d times: nothing of this update was written; "+
					"another administrator or script is changing it now: see what it holds (%s) and run the update again", what, i, show)})
		}
		if err := b.Sleep(ctx, b.pause(i)); err != nil {
			return r, fmt.Errorf("%s changed while this update ran, and it stopped before it was written again: %w", what, err)
		}
	}
}

// updateBackoff is the pause after an update's attempt refused with
// PreconditionFailed (updateIfMatch, R-E13): Sleep waits (the real one
// sleeps, or ends with ctx; a test's records and returns at once), and
// Jitter(n) is uniform in [0, n).
type updateBackoff struct {
	Sleep  func(ctx context.Context, d time.Duration) error
	Jitter func(n int64) int64
}

// Pauses after the first refused attempt and at most: the first is in
// [50 ms, 100 ms), the second in [100 ms, 200 ms) (doubled, then up to
// as much again at random), so an update under contention takes at most
// 300 ms more than its three round trips.
const (
	updatePauseFirst = 50 * time.Millisecond
	updatePauseMax   = 200 * time.Millisecond
)

// pause is the wait after the refused attempt n (1, 2, ...): base
// updatePauseFirst doubled n-1 times, plus a jitter below the base, at
// most updatePauseMax.
func (b updateBackoff) pause(n int) time.Duration {
	base := min(updatePauseFirst<<(n-1), updatePauseMax)
	return min(base+time.Duration(b.Jitter(int64(base))), updatePauseMax)
}

// realUpdateBackoff sleeps on the wall clock.
var realUpdateBackoff = updateBackoff{
	Sleep: func(ctx context.Context, d time.Duration) error {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	},
	Jitter: rand.Int64N,
}

// backoffKey is the context key of a command's updateBackoff.
type backoffKey struct{}

// withUpdateBackoff returns ctx whose commands pause with b (a test's,
// which does not sleep).
func withUpdateBackoff(ctx context.Context, b updateBackoff) context.Context {
	return context.WithValue(ctx, backoffKey{}, b)
}

// backoffFrom is ctx's updateBackoff, the real one by default.
func backoffFrom(ctx context.Context) updateBackoff {
	if b, ok := ctx.Value(backoffKey{}).(updateBackoff); ok {
		return b
	}
	return realUpdateBackoff
}

// createOnly runs a create's PUT with If-None-Match: * (R-E13), so it
// never replaces an object of that name, even one created at the same
// moment. It answers exists when the object is there: the PUT refused
// with 412, or refused for another reason (a bad flag, a pool that does
// not exist, a token that may not write) while get finds it, as the
// create answered when it read before writing, so scripts see the same.
func createOnly[T any](put func(vhttp.Condition) (T, error), get func() error, exists error) (T, error) {
	r, err := put(vhttp.Condition{IfNoneMatch: "*"})
	if err != nil && (vdibroker.ErrorCode(err) == vdibroker.EPreconditionFailed || get() == nil) {
		return r, exists
	}
	return r, fail(err)
}

// groupFlags are an application group's settable fields as flags; each
// command reads back only the flags given.
type groupFlags struct {
	friendlyName, description string
	users, groups             []string
	addUsers, removeUsers     []string
	addGroups, removeGroups   []string
	allUsers                  bool
}

func (g *groupFlags) register(f *pflag.FlagSet, update bool) {
	textVar(f, &g.friendlyName, "friendly-name", vdibroker.MaxTextLen, fmt.Sprintf("display name, at most %d characters", vdibroker.MaxTextLen))
	textVar(f, &g.description, "description", vdibroker.MaxTextLen, fmt.Sprintf("free text, at most %d characters", vdibroker.MaxTextLen))
	f.StringSliceVar(&g.users, "users", nil, "the users assigned (repeat or comma-separate; names compare in any case)")
	f.StringSliceVar(&g.groups, "groups", nil, "the groups assigned (an end user's token groups or OpenID Connect groups claim)")
	f.Var(boolValue{&g.allUsers}, "all-users", "assign every user: true or false")
	if update {
		f.StringSliceVar(&g.addUsers, "add-users", nil, "users to add to the assignments")
		f.StringSliceVar(&g.removeUsers, "remove-users", nil, "users to take out of the assignments (any case)")
		f.StringSliceVar(&g.addGroups, "add-groups", nil, "groups to add to the assignments")
		f.StringSliceVar(&g.removeGroups, "remove-groups", nil, "groups to take out of the assignments (any case)")
	}
}

// apply sets on g what the command's flags say. The notes say what a
// removal did not do, which the command prints as warnings: a user or
// group that was not assigned (a mistyped name, whose removal would read
// as done while the one meant keeps her access), and those taken out of
// a group assigned to all users, who keep it through that (R-E2).
func (gf *groupFlags) apply(cmd *cobra.Command, g *vdibroker.ApplicationGroup) (notes []string) {
	f := cmd.Flags()
	if f.Changed("friendly-name") {
		g.FriendlyName = gf.friendlyName
	}
	if f.Changed("description") {
		g.Description = gf.description
	}
	if f.Changed("users") {
		g.Assignments.Users = gf.users
	}
	if f.Changed("groups") {
		g.Assignments.Groups = gf.groups
	}
	if f.Changed("all-users") {
		g.Assignments.AllUsers = gf.allUsers
	}
	for _, n := range notAssigned(g.Assignments.Users, gf.removeUsers) {
		notes = append(notes, fmt.Sprintf("user %q is not assigned to application group %q: nothing removed for it", n, g.Name))
	}
	for _, n := range notAssigned(g.Assignments.Groups, gf.removeGroups) {
		notes = append(notes, fmt.Sprintf("group %q is not assigned to application group %q: nothing removed for it", n, g.Name))
	}
	g.Assignments.Users = vdibroker.EditUsers(g.Assignments.Users, gf.addUsers, gf.removeUsers)
	g.Assignments.Groups = vdibroker.EditUsers(g.Assignments.Groups, gf.addGroups, gf.removeGroups)
	if g.Assignments.AllUsers && len(gf.removeUsers)+len(gf.removeGroups) > 0 {
		notes = append(notes, fmt.Sprintf("application group %q is assigned to all users: those taken out still have it (--all-users false to end that)", g.Name))
	}
	return notes
}

// notAssigned is the names of remove that list does not hold in any case
// (R-E5).
func notAssigned(list, remove []string) []string {
	var out []string
	for _, n := range remove {
		if !vdibroker.ContainsUser(list, n) {
			out = append(out, n)
		}
	}
	return out
}

func newApplicationGroupCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "applicationgroup",
		Aliases: []string{"application-group"},
		Short:   "Manage application groups: a host pool's Desktop group and its RemoteApp groups, and who is assigned to them",
	}
	a := addAdminFlags(cmd)
	var name, pool, typ string
	var gf groupFlags
	create := &cobra.Command{
		Use:   "create --name NAME --host-pool POOL --application-group-type Desktop|RemoteApp",
		Short: "Create an application group (a pool has at most one Desktop group)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			g := &vdibroker.ApplicationGroup{Name: name, HostPool: pool, ApplicationGroupType: typ}
			gf.apply(cmd, g)
			r, err := createOnly(func(cond vhttp.Condition) (*vhttp.ApplicationGroupResult, error) {
				return c.PutApplicationGroup(cmd.Context(), name, g, cond)
			}, func() error {
				_, err := c.GetApplicationGroup(cmd.Context(), name)
				return err
			}, fail(&vdibroker.Error{Code: vdibroker.EConflict, Message: "application group " + name + " exists already; change it with applicationgroup update"}))
			if err != nil {
				return err
			}
			printWarnings(cmd, r.Warnings) // R-E12: no host of the pool runs RemoteApps
			return a.result(cmd, r, applicationGroupColumns)
		},
	}
	appGroupNameVar(create.Flags(), &name, "name", "application group name, 3..80 characters of A-Za-z0-9@._- and space")
	poolNameVar(create.Flags(), &pool, "host-pool", "", "the host pool whose hosts the group publishes")
	create.Flags().Var(newEnum(&typ, "", vdibroker.AppGroupDesktop, vdibroker.AppGroupRemoteApp), "application-group-type", "Desktop (the pool's desktops) or RemoteApp (applications)")
	_ = create.RegisterFlagCompletionFunc("application-group-type", fixedCompletion(vdibroker.AppGroupDesktop, vdibroker.AppGroupRemoteApp))
	gf.register(create.Flags(), false)
	requireFlags(create, "name", "host-pool", "application-group-type")

	var un string
	var uf groupFlags
	update := &cobra.Command{
		Use:   "update --name NAME [--add-users U] [--remove-groups G] [--all-users true|false] ...",
		Short: "Change an application group's names and assignments; only the flags given change",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			if err := somethingToUpdate(cmd, "name"); err != nil {
				return err
			}
			var notes []string // of the attempt written
			r, err := updateIfMatch(cmd.Context(), "application group "+un, "vdibroker applicationgroup show --name "+un, func() (*vhttp.ApplicationGroupResult, error) {
				g, err := c.GetApplicationGroupETag(cmd.Context(), un)
				if err != nil {
					return nil, err
				}
				notes = uf.apply(cmd, &g.ApplicationGroup)
				return c.PutApplicationGroup(cmd.Context(), un, &g.ApplicationGroup, vhttp.Condition{IfMatch: g.ETag})
			})
			if err != nil {
				return err
			}
			printWarnings(cmd, notes)
			printWarnings(cmd, r.Warnings) // R-E12
			return a.result(cmd, r, applicationGroupColumns)
		},
	}
	appGroupNameVar(update.Flags(), &un, "name", "application group name")
	uf.register(update.Flags(), true)
	requireFlags(update, "name")

	var sn string
	show := &cobra.Command{
		Use:   "show --name NAME",
		Short: "Show an application group with its assignments",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			g, err := c.GetApplicationGroup(cmd.Context(), sn)
			if err != nil {
				return fail(err)
			}
			return a.show(cmd, g, applicationGroupColumns)
		},
	}
	appGroupNameVar(show.Flags(), &sn, "name", "application group name")
	requireFlags(show, "name")

	var lp string
	list := &cobra.Command{
		Use:   "list [--host-pool POOL]",
		Short: "List application groups, of one host pool or all",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// --host-pool "" would list every pool's groups.
			if err := emptyFlag(cmd, "host-pool"); err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			l, err := c.ListApplicationGroups(cmd.Context(), lp)
			if err != nil {
				return fail(err)
			}
			return a.show(cmd, l, applicationGroupColumns)
		},
	}
	list.Flags().StringVar(&lp, "host-pool", "", "only the groups of this host pool")

	var dn string
	del := &cobra.Command{
		Use:   "delete --name NAME",
		Short: "Delete an application group with its applications",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			if err := c.DeleteApplicationGroup(cmd.Context(), dn); err != nil {
				return fail(err)
			}
			return a.deleted(cmd, deletion{Deleted: "applicationgroup", Name: dn})
		},
	}
	appGroupNameVar(del.Flags(), &dn, "name", "application group name")
	requireFlags(del, "name")
	cmd.AddCommand(create, update, show, list, del)
	a.suggestNames(cmd, kindAppGroup)
	return cmd
}

// appFlags are an application's settable fields as flags.
type appFlags struct {
	filePath, setting, arguments, friendlyName, iconPath string
	showInPortal                                         bool
}

func (af *appFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	textVar(f, &af.filePath, "file-path", vdibroker.MaxFilePathLen, fmt.Sprintf("the program's path on the session host, at most %d characters", vdibroker.MaxFilePathLen))
	f.Var(newEnum(&af.setting, "", vdibroker.CommandLineDoNotAllow, vdibroker.CommandLineAllow, vdibroker.CommandLineRequire), "command-line-setting",
		"DoNotAllow (no arguments), Allow (the connect's, else --command-line-arguments) or Require (always --command-line-arguments); default DoNotAllow")
	_ = cmd.RegisterFlagCompletionFunc("command-line-setting", fixedCompletion(vdibroker.CommandLineDoNotAllow, vdibroker.CommandLineAllow, vdibroker.CommandLineRequire))
	textVar(f, &af.arguments, "command-line-arguments", vdibroker.MaxCommandLineLen, fmt.Sprintf("the program's arguments, at most %d characters", vdibroker.MaxCommandLineLen))
	textVar(f, &af.friendlyName, "friendly-name", vdibroker.MaxTextLen, fmt.Sprintf("the name the client shows, at most %d characters", vdibroker.MaxTextLen))
	textVar(f, &af.iconPath, "icon-path", vdibroker.MaxFilePathLen, fmt.Sprintf("the icon's path on the session host, at most %d characters", vdibroker.MaxFilePathLen))
	f.Var(boolValue{&af.showInPortal}, "show-in-portal", "show the application in the user's feed: true or false")
}

func (af *appFlags) apply(cmd *cobra.Command, a *vdibroker.Application) {
	f := cmd.Flags()
	for flag, set := range map[string]func(){
		"file-path":              func() { a.FilePath = af.filePath },
		"command-line-setting":   func() { a.CommandLineSetting = af.setting },
		"command-line-arguments": func() { a.CommandLineArguments = af.arguments },
		"friendly-name":          func() { a.FriendlyName = af.friendlyName },
		"icon-path":              func() { a.IconPath = af.iconPath },
		"show-in-portal":         func() { a.ShowInPortal = af.showInPortal },
	} {
		if f.Changed(flag) {
			set()
		}
	}
}

func newApplicationCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "application",
		Short: "Manage the applications of RemoteApp application groups, and open one for a user",
	}
	a := addAdminFlags(cmd)
	put := func(use, short string, update bool) *cobra.Command {
		var group, name string
		var af appFlags
		c := &cobra.Command{
			Use:   use,
			Short: short,
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				c, err := a.client()
				if err != nil {
					return err
				}
				if update {
					if err := somethingToUpdate(cmd, "application-group", "name"); err != nil {
						return err
					}
				}
				var r *vhttp.ApplicationResult
				if update {
					// Only over the application read (If-Match, R-E13).
					r, err = updateIfMatch(cmd.Context(), fmt.Sprintf("application %s of %s", name, group),
						fmt.Sprintf("vdibroker application show --application-group %s --name %s", group, name), func() (*vhttp.ApplicationResult, error) {
							app, err := c.GetApplicationETag(cmd.Context(), group, name)
							if err != nil {
								return nil, err
							}
							af.apply(cmd, &app.Application)
							return c.PutApplication(cmd.Context(), group, name, &app.Application, vhttp.Condition{IfMatch: app.ETag})
						})
					if err != nil {
						return err
					}
				} else {
					app := &vdibroker.Application{Name: name, ApplicationGroup: group}
					af.apply(cmd, app)
					r, err = createOnly(func(cond vhttp.Condition) (*vhttp.ApplicationResult, error) {
						return c.PutApplication(cmd.Context(), group, name, app, cond)
					}, func() error {
						_, err := c.GetApplication(cmd.Context(), group, name)
						return err
					}, fail(&vdibroker.Error{Code: vdibroker.EConflict, Message: "application " + name + " exists already in " + group + "; change it with application update"}))
					if err != nil {
						return err
					}
				}
				printWarnings(cmd, r.Warnings) // R-E12: no host of the pool runs RemoteApps
				if !update && !r.ShowInPortal && !cmd.Flags().Changed("show-in-portal") {
					// Hidden from the feed by default (R-U5), as in Azure's
					// API: said, so that an administrator who meant it for
					// the portal is not left looking for it there.
					printWarnings(cmd, []string{fmt.Sprintf("application %s is not in the users' portal (showInPortal false, the default): --show-in-portal true shows it there; application connect opens it either way", name)})
				}
				return a.result(cmd, r, applicationColumns)
			},
		}
		appGroupNameVar(c.Flags(), &group, "application-group", "the RemoteApp application group")
		appNameVar(c.Flags(), &name, "name", "the application's name, its alias in the .rdp file, 1..64 characters")
		af.register(c)
		requireFlags(c, "application-group", "name")
		if !update {
			requireFlags(c, "file-path")
		}
		return c
	}
	create := put("create --application-group GROUP --name NAME --file-path PATH", "Publish an application in a RemoteApp group", false)
	update := put("update --application-group GROUP --name NAME [--friendly-name N] ...", "Change an application; only the flags given change", true)

	var group, name string
	show := &cobra.Command{
		Use:   "show --application-group GROUP --name NAME",
		Short: "Show an application",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			app, err := c.GetApplication(cmd.Context(), group, name)
			if err != nil {
				return fail(err)
			}
			return a.show(cmd, app, applicationColumns)
		},
	}
	appGroupNameVar(show.Flags(), &group, "application-group", "the RemoteApp application group")
	appNameVar(show.Flags(), &name, "name", "the application's name")
	requireFlags(show, "application-group", "name")

	var lg string
	list := &cobra.Command{
		Use:   "list --application-group GROUP",
		Short: "List a RemoteApp group's applications",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			l, err := c.ListApplications(cmd.Context(), lg)
			if err != nil {
				return fail(err)
			}
			return a.show(cmd, l, applicationColumns)
		},
	}
	appGroupNameVar(list.Flags(), &lg, "application-group", "the RemoteApp application group")
	requireFlags(list, "application-group")

	var dg, dn string
	del := &cobra.Command{
		Use:   "delete --application-group GROUP --name NAME",
		Short: "Delete an application",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			if err := c.DeleteApplication(cmd.Context(), dg, dn); err != nil {
				return fail(err)
			}
			return a.deleted(cmd, deletion{Deleted: "application", ApplicationGroup: dg, Name: dn})
		},
	}
	appGroupNameVar(del.Flags(), &dg, "application-group", "the RemoteApp application group")
	appNameVar(del.Flags(), &dn, "name", "the application's name")
	requireFlags(del, "application-group", "name")

	var req vdibroker.AppConnectRequest
	var cg string
	connect := &cobra.Command{
		Use:   "connect --application-group GROUP --name APP [--user USER] [--command-line ARGS] [--dry-run]",
		Short: "Open an application for a user: its session and a RemoteApp .rdp file",
		Long:  "Open an application for a user: the user's session in the group's pool and a\nRemoteApp .rdp file.\n" + connectUserHelp,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			if req.User, err = a.connectUser(cmd, c, req.User); err != nil {
				return err
			}
			r, err := c.ConnectApplication(cmd.Context(), cg, req)
			if err != nil {
				return fail(err)
			}
			return a.show(cmd, r, connectColumns)
		},
	}
	appGroupNameVar(connect.Flags(), &cg, "application-group", "the RemoteApp application group")
	appNameVar(connect.Flags(), &req.Application, "name", "the application")
	connect.Flags().StringVar(&req.User, "user", "", "the user (default with a User token: its own user)")
	textVar(connect.Flags(), &req.CommandLine, "command-line", vdibroker.MaxCommandLineLen, fmt.Sprintf("arguments, for an application whose setting is Allow, at most %d characters", vdibroker.MaxCommandLineLen))
	connect.Flags().BoolVar(&req.DryRun, "dry-run", false, "decide and store nothing")
	requireFlags(connect, "application-group", "name")

	cmd.AddCommand(create, update, show, list, del, connect)
	a.suggestNames(cmd, kindApp)
	return cmd
}

func newUserCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "user",
		Short: "What a user may use, and why",
	}
	a := addAdminFlags(cmd)
	var user string
	var groups []string
	ents := &cobra.Command{
		Use:   "entitlements [--user USER] [--groups G1,G2]",
		Short: "List each desktop, application and global entitlement the user may use, with the assignment or group that grants it",
		Long: `List each desktop, application and global entitlement the user may use,
with the assignment or group that grants it (R-E10). Without --user, a User
token asks about its own user, the only one it may (whoami); any other
token names the user with --user.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			user, who, err := a.tokenUser(cmd, c, user)
			if err != nil {
				return err
			}
			if user == "" {
				return usageError{fmt.Errorf("--user: required with this token (role %s): only a User token asks about its own user without it", who.Role)}
			}
			u, err := c.UserEntitlements(cmd.Context(), user, groups)
			if err != nil {
				return fail(err)
			}
			printWarnings(cmd, u.Warnings)
			if o := a.outputFor(formatTable); o.Format == formatTable && o.Query == "" {
				return a.show(cmd, u.Resources, userEntitlementColumns)
			}
			return a.show(cmd, u, nil)
		},
	}
	ents.Flags().StringVar(&user, "user", "", "the user (default with a User token: its own user)")
	ents.Flags().StringSliceVar(&groups, "groups", nil, "the user's groups (a User token's own are its identity's)")
	cmd.AddCommand(ents)
	return cmd
}

// somethingToUpdate refuses an update that names only what it updates
// (the flags keys): it would write the resource back as it is, an audit
// entry for no change, where hostpool and sessionhost update say
// "nothing to update".
func somethingToUpdate(cmd *cobra.Command, keys ...string) error {
	var flags []string
	changed := false
	cmd.LocalNonPersistentFlags().VisitAll(func(f *pflag.Flag) {
		if f.Name == "help" || slices.Contains(keys, f.Name) {
			return
		}
		flags = append(flags, "--"+f.Name)
		changed = changed || f.Changed
	})
	if changed {
		return nil
	}
	return usageError{fmt.Errorf("nothing to update: give at least one of %s", strings.Join(flags, ", "))}
}
