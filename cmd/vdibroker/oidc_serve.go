package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/console"
	"github.com/vdibroker/vdibroker/identity"
)

// OIDCFlags are serve's OpenID Connect flags (issue 15). Sign-in with an
// identity provider is off unless --oidc-issuer is set.
type OIDCFlags struct {
	Issuer           string
	ClientID         string
	ClientSecretFile string
	RoleMapFile      string
	GroupsClaim      string
	// RedirectURL is the console's callback registered at the provider;
	// empty derives it from each sign-in's request (scheme://host/signin/oidc/callback).
	RedirectURL string

	provider *identity.Provider // set by load
}

func (f *OIDCFlags) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&f.Issuer, "oidc-issuer", "", "OpenID Connect issuer URL (e.g. https://login.microsoftonline.com/TENANT/v2.0); empty: no single sign-on")
	fs.StringVar(&f.ClientID, "oidc-client-id", "", "the client (application) id registered at the issuer; ID and access tokens must name it as their audience")
	fs.StringVar(&f.ClientSecretFile, "oidc-client-secret-file", "", "file holding the client secret (none: a public client, PKCE only)")
	fs.StringVar(&f.RoleMapFile, "oidc-role-map", "", "YAML file mapping groups to a role and host pools (groups: {NAME: {role: Contributor, hostPools: [p1]}})")
	fs.StringVar(&f.GroupsClaim, "oidc-groups-claim", "groups", "the token claim holding the user's groups")
	fs.StringVar(&f.RedirectURL, "oidc-redirect-url", "", "the console's callback registered at the issuer, https://HOST/signin/oidc/callback (default: from each request's host)")
}

// load discovers the provider when configured.
func (f *OIDCFlags) load(ctx context.Context) error {
	if f.Issuer == "" {
		if f.ClientID != "" || f.ClientSecretFile != "" || f.RoleMapFile != "" {
			return usageError{errors.New("--oidc-client-id, --oidc-client-secret-file and --oidc-role-map need --oidc-issuer")}
		}
		return nil
	}
	if f.ClientID == "" || f.RoleMapFile == "" {
		return usageError{errors.New("--oidc-issuer needs --oidc-client-id and --oidc-role-map")}
	}
	roles, err := identity.LoadRoleMap(f.RoleMapFile)
	if err != nil {
		return fmt.Errorf("--oidc-role-map: %w", err)
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
		RedirectURL: f.RedirectURL, GroupsClaim: f.GroupsClaim, Roles: roles})
	return err
}

// addConsole offers single sign-on on the console's sign-in page; refused
// sign-ins go to the audit trail through audit.
func (f *OIDCFlags) addConsole(c *console.Console, audit vdibroker.AuditStore) {
	if f.provider != nil {
		c.EnableOIDC(f.provider, audit)
	}
}
