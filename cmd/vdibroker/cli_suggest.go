package main

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// A name the broker does not know ("host pool "contosohp1" not found") is
// answered with the names near it that the caller may read: "(did you
// mean "contosohp01"?)". The CLI finds which of the names it gave is
// missing by reading each, outermost first (the pool, then its host),
// with the caller's own token, and lists that kind as its list command
// does, one page: the broker answers a principal scoped to host pools
// its pools' resources only (R-SEC), so the hint never names a resource
// the caller could not list. A token whose role may not read (User) is
// sent no read at all (whoami says its role). When a read or the list
// fails or is refused, the broker's error is printed as it was.

// nameKind is a kind of resource a flag names.
type nameKind int

// The kinds, parents before their children: the order in which a
// command's names are read.
const (
	kindNone nameKind = iota
	kindPool
	kindHost // of the command's host pool
	kindAppGroup
	kindApp // of the command's application group
	kindPlan
	kindGlobalEntitlement
)

// suggestPageSize is how many names of a kind the hint reads: one page
// of the list, the broker's largest, however many there are (a name past
// it gets no hint). A variable for the tests.
var suggestPageSize = 1000

// suggestTimeout bounds the reads behind one hint.
const suggestTimeout = 10 * time.Second

// nameKinds says how to read one resource of a kind (nil: it exists),
// and how to list the names of its kind, under its parent's name.
var nameKinds = map[nameKind]struct {
	parent nameKind
	get    func(ctx context.Context, c *vhttp.Client, parent, name string) error
	list   func(ctx context.Context, c *vhttp.Client, parent string) ([]string, error)
}{
	kindPool: {
		get: func(ctx context.Context, c *vhttp.Client, _, name string) error {
			_, err := c.GetHostPool(ctx, name)
			return err
		},
		list: func(ctx context.Context, c *vhttp.Client, _ string) ([]string, error) {
			return namesOf(c.ListHostPools(ctx))(func(p *vhttp.HostPoolResult) string { return p.Name })
		},
	},
	kindHost: {
		parent: kindPool,
		get: func(ctx context.Context, c *vhttp.Client, pool, name string) error {
			_, err := c.GetSessionHost(ctx, pool, name)
			return err
		},
		list: func(ctx context.Context, c *vhttp.Client, pool string) ([]string, error) {
			return namesOf(c.ListSessionHosts(ctx, pool))(func(h *vdibroker.SessionHost) string { return h.Name })
		},
	},
	kindAppGroup: {
		get: func(ctx context.Context, c *vhttp.Client, _, name string) error {
			_, err := c.GetApplicationGroup(ctx, name)
			return err
		},
		list: func(ctx context.Context, c *vhttp.Client, _ string) ([]string, error) {
			return namesOf(c.ListApplicationGroups(ctx, ""))(func(g *vdibroker.ApplicationGroup) string { return g.Name })
		},
	},
	kindApp: {
		parent: kindAppGroup,
		get: func(ctx context.Context, c *vhttp.Client, group, name string) error {
			_, err := c.GetApplication(ctx, group, name)
			return err
		},
		list: func(ctx context.Context, c *vhttp.Client, group string) ([]string, error) {
			return namesOf(c.ListApplications(ctx, group))(func(a *vdibroker.Application) string { return a.Name })
		},
	},
	kindPlan: {
		get: func(ctx context.Context, c *vhttp.Client, _, name string) error {
			_, err := c.GetScalingPlan(ctx, name)
			return err
		},
		list: func(ctx context.Context, c *vhttp.Client, _ string) ([]string, error) {
			return namesOf(c.ListScalingPlans(ctx))(func(p *vdibroker.ScalingPlan) string { return p.Name })
		},
	},
	kindGlobalEntitlement: {
		get: func(ctx context.Context, c *vhttp.Client, _, name string) error {
			_, err := c.GetGlobalEntitlement(ctx, name)
			return err
		},
		list: func(ctx context.Context, c *vhttp.Client, _ string) ([]string, error) {
			return namesOf(c.ListGlobalEntitlements(ctx))(func(e *vdibroker.EntitlementView) string { return e.Name })
		},
	},
}

// namesOf maps a list's items to their names (or passes its error on).
func namesOf[T any](items []T, err error) func(name func(T) string) ([]string, error) {
	return func(name func(T) string) ([]string, error) {
		if err != nil {
			return nil, err
		}
		out := make([]string, len(items))
		for i, it := range items {
			out[i] = name(it)
		}
		return out, nil
	}
}

// suggestNames makes cmd and every command under it add "did you mean"
// to a NotFound answer, for the names its flags give: --host-pool a host
// pool, --session-host a session host, --application-group an
// application group, and --name a resource of kind name (none on
// create, whose --name is the new resource's).
func (a *admin) suggestNames(cmd *cobra.Command, name nameKind) {
	for _, sub := range cmd.Commands() {
		a.suggestNames(sub, name)
	}
	run := cmd.RunE
	if run == nil {
		return
	}
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		err := run(cmd, args)
		if vdibroker.ErrorCode(err) != vdibroker.ENotFound {
			return err
		}
		kinds := map[nameKind]string{}
		flagKinds := map[string]nameKind{"host-pool": kindPool, "session-host": kindHost, "application-group": kindAppGroup}
		if cmd.Name() != "create" {
			flagKinds["name"] = name
		}
		for flag, k := range flagKinds {
			if f := cmd.Flags().Lookup(flag); f != nil && f.Changed && k != kindNone {
				kinds[k] = f.Value.String()
			}
		}
		c, cerr := a.client()
		if cerr != nil || len(kinds) == 0 {
			return err
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), suggestTimeout)
		defer cancel()
		if hint := a.nameHint(ctx, c, kinds); hint != "" {
			return hinted{err, hint}
		}
		return err
	}
}

// tokenMayRead reports whether c's token may read what the admin
// commands read (GET): not a User's, which opens its desktops and apps
// and lists, logs off and disconnects its own sessions. A caller asks it
// (whoami is any token's and refuses none) before sending a read the
// broker would refuse: each would be an audit entry of a request its
// user never made, spending the token's budget of written refusals
// (R-SEC).
func (a *admin) tokenMayRead(ctx context.Context, c *vhttp.Client) (bool, error) {
	who, err := a.whoAmIOnce(ctx, c)
	if err != nil {
		return false, err
	}
	return vdibroker.Authorize(&vdibroker.Principal{Role: who.Role}, vdibroker.ActionRead, vdibroker.Target{}) == nil, nil
}

// nameHint is " (did you mean "N"?)" for the first of names (by kind,
// parents first) that the caller cannot read, naming the nearest of the
// names of its kind the caller can list; "" when every name reads (the
// answer was about something else, a session's id), a read or the list
// fails, or nothing is near.
func (a *admin) nameHint(ctx context.Context, c *vhttp.Client, names map[nameKind]string) string {
	lc := *c // the caller's token, one page of names
	lc.PageSize, lc.MaxPages = suggestPageSize, 1
	// A User's token (it connects and logs off its own sessions, which
	// answer 404 too) is not sent reads the broker refuses.
	if read, err := a.tokenMayRead(ctx, &lc); err != nil || !read {
		return ""
	}
	for k := kindPool; k <= kindGlobalEntitlement; k++ {
		name, ok := names[k]
		if !ok {
			continue
		}
		kind := nameKinds[k]
		parent := ""
		if kind.parent != kindNone {
			if parent, ok = names[kind.parent]; !ok {
				continue // a host without its pool: nothing to read it in
			}
		}
		err := kind.get(ctx, &lc, parent, name)
		if err == nil {
			continue
		}
		if vdibroker.ErrorCode(err) != vdibroker.ENotFound {
			return ""
		}
		all, err := kind.list(ctx, &lc, parent)
		if err != nil {
			return ""
		}
		if near := nearNames(name, all, 3); len(near) > 0 {
			return " (did you mean " + quoteList(near) + "?)"
		}
		return ""
	}
	return ""
}

// hinted is a command's error with a hint after its message; the exit
// status and what errors.As finds are the error's own.
type hinted struct {
	err  error
	hint string
}

func (h hinted) Error() string { return h.err.Error() + h.hint }
func (h hinted) Unwrap() error { return h.err }
