package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/console"
	"github.com/vdibroker/vdibroker/identity"
	"github.com/vdibroker/vdibroker/portal"
)

// OIDCFlags are serve's OpenID Connect flags. Sign-in with an identity
// provider is off unless --oidc-issuer is set.
type OIDCFlags struct {
	Issuer           string
	ClientID         string
	ClientSecretFile string
	RoleMapFile      string
	GroupsClaim      string
	// RedirectURL is the console's callback registered at the provider;
	// empty is --external-url's /signin/oidc/callback (a broker listening
	// on loopback without --external-url: its own URL's). Never a
	// request's Host.
	RedirectURL string

	provider *identity.Provider // set by load
}

func (f *OIDCFlags) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&f.Issuer, "oidc-issuer", "", "OpenID Connect issuer URL (e.g. https://login.microsoftonline.com/TENANT/v2.0); empty: no single sign-on")
	fs.StringVar(&f.ClientID, "oidc-client-id", "", "the client (application) id registered at the issuer; ID and access tokens must name it as their audience")
	fs.StringVar(&f.ClientSecretFile, "oidc-client-secret-file", "", "file holding the client secret (none: a public client, PKCE only)")
	fs.StringVar(&f.RoleMapFile, "oidc-role-map", "", "YAML file mapping groups to a role and host pools (groups: {NAME: {role: Contributor, hostPools: [p1]}}) for the console and the API; read again on SIGHUP (none: the user portal only)")
	fs.StringVar(&f.GroupsClaim, "oidc-groups-claim", "groups", "the token claim holding the user's groups")
	fs.StringVar(&f.RedirectURL, "oidc-redirect-url", "", "the console's callback registered at the issuer (default: --external-url + /signin/oidc/callback; register --external-url + /signin as the post-logout redirect)")
}

// load discovers the provider when configured.
func (f *OIDCFlags) load(ctx context.Context) error {
	if f.Issuer == "" {
		if f.ClientID != "" || f.ClientSecretFile != "" || f.RoleMapFile != "" {
			return usageError{errors.New("--oidc-client-id, --oidc-client-secret-file and --oidc-role-map need --oidc-issuer")}
		}
		return nil
	}
	if f.ClientID == "" {
		return usageError{errors.New("--oidc-issuer needs --oidc-client-id")}
	}
	if f.RedirectURL != "" {
		if u, err := url.Parse(f.RedirectURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return usageError{fmt.Errorf("--oidc-redirect-url must be an http:// or https:// URL, got %q", f.RedirectURL)}
		}
	}
	// Without a role map nobody signs in to the console, and everyone
	// the provider vouches for may use the user portal (R-U2).
	var roles identity.RoleMap
	var err error
	if f.RoleMapFile != "" {
		if roles, err = identity.LoadRoleMap(f.RoleMapFile); err != nil {
			return fmt.Errorf("--oidc-role-map: %w", err)
		}
	}
	var secret string
	if f.ClientSecretFile != "" {
		b, err := os.ReadFile(f.ClientSecretFile)
		if err != nil {
			return fmt.Errorf("--oidc-client-secret-file: %w", err)
		}
		secret = strings.TrimSpace(string(b))
	}
	f.provider, err = identity.New(ctx, identity.Config{Issuer: f.Issuer, ClientID: f.ClientID, ClientSecret: secret,
		GroupsClaim: f.GroupsClaim, Roles: roles})
	return err
}

// reload reads the role map again (SIGHUP): sign-ins and tokens verified
// from now on get the new roles. A file that does not load keeps the map
// in force and says why.
func (f *OIDCFlags) reload(log *slog.Logger) {
	if f.provider == nil || f.RoleMapFile == "" {
		return
	}
	roles, err := identity.LoadRoleMap(f.RoleMapFile)
	if err != nil {
		log.Error("SIGHUP: OIDC role map kept", "file", f.RoleMapFile, "err", err)
		return
	}
	f.provider.SetRoles(roles)
	log.Warn("SIGHUP: OIDC role map", "file", f.RoleMapFile, "groups", len(roles.Groups))
}

// siteURL is the URL the browser reaches the broker at, which the
// provider sends it back to: --external-url; else the origin of
// --oidc-redirect-url; else, for a broker listening on loopback only,
// its own URL. Never a request's Host header.
func (m *Main) siteURL() (string, error) {
	if m.Federation.ExternalURL != "" {
		return strings.TrimSuffix(m.Federation.ExternalURL, "/"), nil
	}
	if m.OIDC.RedirectURL != "" {
		u, _ := url.Parse(m.OIDC.RedirectURL) // checked by load
		return u.Scheme + "://" + u.Host, nil
	}
	if ip := net.ParseIP(m.listener.Addr().(*net.TCPAddr).IP.String()); ip != nil && ip.IsLoopback() {
		return m.URL(), nil
	}
	return "", usageError{errors.New("--oidc-issuer needs --external-url (the URL browsers reach this broker at) unless it listens on loopback only")}
}

// addConsole offers single sign-on on the console's sign-in page: the
// callback and post-logout URLs from siteURL, the state cookie's key the
// replicas share (made by the first), the API's per-address limit of
// failed authentications, refusals recorded within a budget.
func (m *Main) addOIDCConsole(ctx context.Context, c *console.Console, st vdibroker.Store) error {
	if m.OIDC.provider == nil {
		return nil
	}
	site, err := m.siteURL()
	if err != nil {
		return err
	}
	callback := m.OIDC.RedirectURL
	if callback == "" {
		callback = site + console.OIDCCallbackPath
	}
	key, err := signinKey(ctx, st)
	if err != nil {
		return err
	}
	m.Logger.Info("single sign-on", "issuer", m.OIDC.Issuer, "callback", callback, "postLogout", site+"/signin")
	return c.EnableOIDC(console.OIDCConfig{Provider: m.OIDC.provider, CallbackURL: callback, PostLogoutURL: site + "/signin", Key: key,
		Limit: m.Server, Refusals: &console.AuditRefusals{Audit: m.broker, Logger: m.Logger}})
}

// signinKey is the key sealing single sign-on's state cookies, the same
// on every replica (made by the first, kept in the database).
func signinKey(ctx context.Context, st vdibroker.Store) ([]byte, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	stored, err := st.InitSharedValue(ctx, vdibroker.SharedSigninKey, hex.EncodeToString(key), time.Now())
	if err != nil {
		return nil, fmt.Errorf("the sign-in state key: %w", err)
	}
	if key, err = hex.DecodeString(stored); err != nil || len(key) != 32 {
		return nil, fmt.Errorf("the sign-in state key in the database is not 32 bytes of hex")
	}
	return key, nil
}

// newPortal makes the user portal (R-U1): the API in-process, sign-ins
// in the database, launches audited; single sign-on where any identity
// the provider vouches for is an end user (R-U2), its callback and
// post-logout page under the site's URL.
func (m *Main) newPortal(ctx context.Context, st vdibroker.Store) (*portal.Portal, error) {
	secure := strings.HasPrefix(m.Federation.ExternalURL, "https://")
	cfg := portal.Config{API: m.Server.Handler(), Sessions: st, Launches: st, Audit: m.broker, Logger: m.Logger, SecureCookies: secure,
		Refusals: &console.AuditRefusals{Audit: m.broker, Logger: m.Logger}, SpendWrite: m.Server.UserWriteSpend,
		GatewayTokenTTL: m.Gateway.TokenTTL} // the launch page says how long a gateway's file opens (R-GW1)
	if m.PortalMaxSignins > 0 {
		cfg.SessionLimits = portal.DefaultSessionLimits
		cfg.SessionLimits.PerArea = m.PortalMaxSignins
	}
	if m.OIDC.provider != nil {
		site, err := m.siteURL()
		if err != nil {
			return nil, err
		}
		key, err := signinKey(ctx, st)
		if err != nil {
			return nil, err
		}
		cfg.OIDC, err = identity.NewFlow(identity.FlowConfig{Provider: m.OIDC.provider, CallbackURL: site + portal.OIDCCallbackPath,
			StateCookie: portal.OIDCStateCookie, StatePath: portal.OIDCStatePath, Key: key, EndUsers: true,
			Secure: func(r *http.Request) bool { return r.TLS != nil || secure }})
		if err != nil {
			return nil, err
		}
		cfg.PostLogoutURL = site + portal.SigninPath
	}
	return portal.New(cfg), nil
}
