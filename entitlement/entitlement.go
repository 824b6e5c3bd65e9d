// Package entitlement is the entitlement service (vdibroker.EntitlementService,
// R-E1..R-E12): application groups and their applications, who is
// assigned to them, and the connects of end users, which need an
// assignment. It implements vdibroker.ConnectService too, around the
// broker's connect: cmd/vdibroker gives the HTTP API this one, so every
// desktop connect of an end user is checked (R-E3) and an application
// connect is a desktop connect whose .rdp file opens the application
// (R-E7). The federation service keeps the broker's own connect: a global
// entitlement's grant is its own (R-E9).
package entitlement

import (
	"context"
	"crypto/sha256"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"k8s.io/utils/clock"

	"github.com/vdibroker/vdibroker"
)

// Store is what the service reads and writes: application groups, their
// assignments and applications, and the federation document (for a
// user's global entitlements, R-E10).
type Store interface {
	vdibroker.EntitlementStore
	GetFederation(ctx context.Context) (*vdibroker.Federation, error)
	// ListHostPools names a feed's desktops after their pools (R-U5).
	ListHostPools(ctx context.Context) ([]*vdibroker.HostPool, error)
	// GetHostPool says a group list's pool filter names no pool (R-E1).
	GetHostPool(ctx context.Context, name string) (*vdibroker.HostPool, error)
	// ListHostStates reads whether a pool's hosts can run RemoteApps, for
	// the warning of a write to its RemoteApp groups (R-E12).
	ListHostStates(ctx context.Context, pool string) ([]*vdibroker.SessionHost, error)
	// PoolsWithoutRemoteApps names the pools of a feed's RemoteApps none
	// of whose hosts can run them, in one read (R-E12, R-U5).
	PoolsWithoutRemoteApps(ctx context.Context, pools []string) ([]string, error)
}

// Config is what a Service needs.
type Config struct {
	// Store is the broker's guarded store (broker.Service.Store): every
	// call bounded by the store timeout, StoreUnavailable during an
	// outage.
	Store Store
	// Connect is the broker's connect, which places the users this
	// service lets through.
	Connect vdibroker.ConnectService
	// Pod is the broker's pod name in a federation (serve --pod-name),
	// empty when it is none: a pod's user's entitlements include the
	// global ones (R-E10), and its feed names their members here.
	Pod    string
	Logger *slog.Logger // nil discards logs
	// Clock stamps the groups and applications written (nil = the real
	// clock).
	Clock clock.PassiveClock
}

// Service is the entitlement service.
type Service struct {
	store   Store
	connect vdibroker.ConnectService
	log     *slog.Logger
	clock   clock.PassiveClock
	pod     string // Config.Pod
	// decisions are the last answers of Entitled read from the store, by
	// resource and identity: what R-E11 answers during an outage.
	decisions decisionCache
}

var (
	_ vdibroker.EntitlementService = (*Service)(nil)
	_ vdibroker.ConnectService     = (*Service)(nil)
)

// New returns the entitlement service on cfg.Store.
func New(cfg Config) *Service {
	s := &Service{store: cfg.Store, connect: cfg.Connect, log: cfg.Logger, clock: cfg.Clock, pod: cfg.Pod}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.clock == nil {
		s.clock = clock.RealClock{}
	}
	return s
}

// Connect is the broker's connect for an end user entitled to the pool's
// desktop (R-E3), and for everyone else as it is.
func (s *Service) Connect(ctx context.Context, pool string, req vdibroker.ConnectRequest, key string) (*vdibroker.ConnectAnswer, error) {
	if p := vdibroker.PrincipalFrom(ctx); p.EndUser() {
		if err := s.authorizeEndUser(ctx, p, vdibroker.Resource{HostPool: pool}, &req); err != nil {
			return nil, err
		}
	}
	return s.connect.Connect(ctx, pool, req, key)
}

// authorizeEndUser checks an end user's connect to r: the request's
// fields, the principal's right to connect that user (its own), then the
// entitlement. The broker's connect checks the first two again; here
// they come first so a User token naming another user is told so, not
// that the other user is not entitled.
func (s *Service) authorizeEndUser(ctx context.Context, p *vdibroker.Principal, r vdibroker.Resource, req *vdibroker.ConnectRequest) error {
	if err := vdibroker.ValidateConnect(req); err != nil {
		return err
	}
	pool := r.HostPool
	if err := vdibroker.Authorize(p, vdibroker.ActionConnect, vdibroker.Target{HostPool: pool, For: &vdibroker.UserIdentity{User: req.User}}); err != nil {
		return err
	}
	_, err := s.Entitled(ctx, vdibroker.UserIdentity{User: req.User, Groups: p.Groups}, r)
	return err
}

// Entitled returns the grant that entitles who to r (R-E2), or
// NotEntitled naming the user and the resource (R-E3). During a store
// outage it answers what it last read for the same identity and resource
// (R-E11).
func (s *Service) Entitled(ctx context.Context, who vdibroker.UserIdentity, r vdibroker.Resource) (*vdibroker.Grant, error) {
	q := vdibroker.AssignmentQuery{User: who.User, Groups: who.Groups}
	if r.ApplicationGroup != "" {
		q.ApplicationGroup = r.ApplicationGroup
	} else {
		q.HostPool, q.Type = r.HostPool, vdibroker.AppGroupDesktop
	}
	key := decisionKey(who, r)
	groups, err := s.store.AssignedApplicationGroups(ctx, q)
	if vdibroker.ErrorCode(err) == vdibroker.EStoreUnavailable {
		if g, ok := s.decisions.get(key); ok {
			if g == nil {
				return nil, vdibroker.NotEntitled(who.User, r)
			}
			return g, nil
		}
		return nil, err
	}
	if err != nil {
		return nil, err
	}
	var grant *vdibroker.Grant
	for _, g := range groups {
		if grant = g.Assignments.Grants(who); grant != nil {
			grant.ApplicationGroup = g.Name
			break
		}
	}
	s.decisions.put(key, grant)
	if grant == nil {
		return nil, vdibroker.NotEntitled(who.User, r)
	}
	return grant, nil
}

// maxDecisions bounds the outage answers kept (R-E11): only authenticated
// end users' connects add one. Grants and refusals are bounded apart,
// each starting again when full: any end user adds refusals at will
// (names of resources that are not hers, or do not exist, up to her
// write budget), and filling one map together would drop every other
// user's grants, which only the directory's assignments make.
const maxDecisions = 100000

// decisionCache keeps the last Entitled answer read from the store per
// identity and resource: a grant in granted, a refusal in refused.
type decisionCache struct {
	mu      sync.Mutex
	granted map[string]*vdibroker.Grant
	refused map[string]struct{}
	max     int // maxDecisions when 0
}

func (c *decisionCache) get(key string) (*vdibroker.Grant, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if g, ok := c.granted[key]; ok {
		return g, true
	}
	_, ok := c.refused[key]
	return nil, ok
}

// put keeps g (nil: a refusal) as key's answer, in place of the other
// kind's.
func (c *decisionCache) put(key string, g *vdibroker.Grant) {
	c.mu.Lock()
	defer c.mu.Unlock()
	limit := c.max
	if limit == 0 {
		limit = maxDecisions
	}
	if g == nil {
		delete(c.granted, key)
		if c.refused == nil || len(c.refused) >= limit {
			c.refused = map[string]struct{}{}
		}
		c.refused[key] = struct{}{}
		return
	}
	delete(c.refused, key)
	if c.granted == nil || len(c.granted) >= limit {
		c.granted = map[string]*vdibroker.Grant{}
	}
	c.granted[key] = g
}

// decisionKey names an identity and a resource: the user's and groups'
// folded names (R-E5), the groups sorted, hashed so that a key is 32
// bytes whatever the groups a user carries (hundreds from a directory):
// maxDecisions then bounds the keys' memory too (R-SEC).
func decisionKey(who vdibroker.UserIdentity, r vdibroker.Resource) string {
	groups := make([]string, len(who.Groups))
	for i, g := range who.Groups {
		groups[i] = vdibroker.FoldUser(g)
	}
	slices.Sort(groups)
	sum := sha256.Sum256([]byte(strings.Join(append([]string{r.HostPool, r.ApplicationGroup, vdibroker.FoldUser(who.User)}, groups...), "\x00")))
	return string(sum[:])
}
