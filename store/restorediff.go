package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/vdibroker/vdibroker"
)

// CredentialChanges is what a restore undoes among the store's credentials:
// the backup is the store as it was, so a token revoked since it was taken
// is valid again, one issued since is gone, and a host whose credential
// was reset or re-keyed since holds a credential the restored store
// refuses (its agent then registers again, and stops when its token is
// refused too). RestoreSQLite replaces the store without asking; these are
// what the administrator must do again by hand.
type CredentialChanges struct {
	// TokensBack are API tokens revoked since the backup, unexpired: valid
	// again after the restore. TokensGone were issued since: refused.
	TokensBack, TokensGone []TokenRef
	// RegistrationTokensBack and RegistrationTokensGone are the same for
	// registration tokens.
	RegistrationTokensBack, RegistrationTokensGone []TokenRef
	// HostsBack were deleted since the backup: they come back, their old
	// credential valid. HostsRekeyed had their credential reset, renewed or
	// first given since: the credential the backup holds (if any) is valid
	// again and the one their agent holds is refused. HostsGone were
	// registered since.
	HostsBack, HostsRekeyed, HostsGone []HostRef
	// GatewayKeysBack are the RD gateway signing keys (R-GW6) dropped
	// since the backup, by a rotation or a revoke: trusted again, and the
	// newest of them signs again. A key revoked because it leaked must be
	// revoked again.
	GatewayKeysBack []string
}

// TokenRef names a token in CredentialChanges: its id and, for an API
// token, its role, subject, host-pool scope and groups (what issuing it
// again takes); for a registration token, its pool.
type TokenRef struct {
	ID, Role, Subject, HostPool string
	HostPools, Groups           []string
	// Gateway is a Gateway token's gateway (R-GW4).
	Gateway string
	// ExpiresIn is the time an API token had left when the backup was
	// compared (0: it never expires).
	ExpiresIn time.Duration
}

// reissueCommand is the CLI command that issues an API token like t
// again, no wider: a token scoped to pools must not come back unscoped,
// nor one that expires come back for ever.
func reissueCommand(t TokenRef) string {
	cmd := "vdibroker token create --role " + t.Role + " --subject " + shellQuote(t.Subject)
	if len(t.HostPools) > 0 {
		cmd += " --host-pools " + shellQuote(flagList(t.HostPools))
	}
	if len(t.Groups) > 0 {
		cmd += " --groups " + shellQuote(flagList(t.Groups))
	}
	switch {
	case t.Role != vdibroker.RoleGateway:
	case t.Gateway == "":
		// Issued before tokens named their gateway (R-GW4): any number
		// of gateways, each under its own --name, may have shared it,
		// and a token issued now is for one, by default its subject:
		// one per gateway, each named (Warnings says so).
		cmd += " --gateway NAME"
	case t.Gateway != t.Subject:
		cmd += " --gateway " + shellQuote(t.Gateway)
	}
	if t.ExpiresIn > 0 {
		d := max(time.Minute, (t.ExpiresIn+time.Minute-1)/time.Minute*time.Minute)
		cmd += " --expires " + vdibroker.DurationFlag(d)
	}
	return cmd
}

// flagList is l as the CLI's list flags read it (pflag's StringSlice, a
// CSV record): a value with a comma or a quote is quoted, so that a
// group "Sales, EMEA" stays one group.
func flagList(l []string) string {
	q := make([]string, len(l))
	for i, v := range l {
		q[i] = v
		if strings.ContainsAny(v, `,"`) {
			q[i] = `"` + strings.ReplaceAll(v, `"`, `""`) + `"`
		}
	}
	return strings.Join(q, ",")
}

// shellQuote is s as one word of a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// HostRef names a session host in CredentialChanges.
type HostRef struct {
	HostPool, Name string
}

// Empty reports whether the restore changes no credential.
func (c *CredentialChanges) Empty() bool {
	return len(c.TokensBack)+len(c.TokensGone)+len(c.RegistrationTokensBack)+len(c.RegistrationTokensGone)+
		len(c.HostsBack)+len(c.HostsRekeyed)+len(c.HostsGone)+len(c.GatewayKeysBack) == 0
}

// Warnings says each change in one line, with the command that undoes it
// once serve runs on the restored store.
func (c *CredentialChanges) Warnings() []string {
	var w []string
	for _, t := range c.TokensBack {
		w = append(w, fmt.Sprintf("API token %s (%s %q) was revoked after the backup and is valid again: vdibroker token delete --id %s",
			t.ID, t.Role, t.Subject, t.ID))
	}
	for _, t := range c.TokensGone {
		if t.Role == vdibroker.RoleGateway && t.Gateway == "" {
			w = append(w, fmt.Sprintf("API token %s (%s %q) was issued after the backup and is gone; it was for no gateway in particular, and a Gateway token is now for one (R-GW4): "+
				"issue one for each gateway that used it (%s, NAME that gateway's --name)",
				t.ID, t.Role, t.Subject, reissueCommand(t)))
			continue
		}
		w = append(w, fmt.Sprintf("API token %s (%s %q) was issued after the backup and is gone: issue another (%s)",
			t.ID, t.Role, t.Subject, reissueCommand(t)))
	}
	for _, t := range c.RegistrationTokensBack {
		w = append(w, fmt.Sprintf("registration token %s of host pool %s was revoked after the backup and is valid again: vdibroker registration-token delete --host-pool %s --id %s",
			t.ID, t.HostPool, t.HostPool, t.ID))
	}
	for _, t := range c.RegistrationTokensGone {
		w = append(w, fmt.Sprintf("registration token %s of host pool %s was issued after the backup and is gone: agents holding it cannot register; give them another (vdibroker registration-token create --host-pool %s)",
			t.ID, t.HostPool, t.HostPool))
	}
	for _, h := range c.HostsBack {
		w = append(w, fmt.Sprintf("session host %s of host pool %s was deleted after the backup and is back, its old credential valid: vdibroker sessionhost delete --host-pool %s --name %s",
			h.Name, h.HostPool, h.HostPool, h.Name))
	}
	for _, h := range c.HostsRekeyed {
		w = append(w, fmt.Sprintf("session host %s of host pool %s had its credential reset or renewed after the backup: the restored store refuses the one its agent holds; vdibroker sessionhost reset-registration --host-pool %s --name %s, then restart its agent with a registration token of the restored store",
			h.Name, h.HostPool, h.HostPool, h.Name))
	}
	for _, h := range c.HostsGone {
		w = append(w, fmt.Sprintf("session host %s of host pool %s was registered after the backup and is gone: its agent registers it again if its registration token is in the restored store; else give it another (vdibroker registration-token create --host-pool %s)",
			h.Name, h.HostPool, h.HostPool))
	}
	for _, kid := range c.GatewayKeysBack {
		w = append(w, fmt.Sprintf("RD gateway signing key %s was dropped after the backup (rotated out, or revoked) and is back: gateways trust it again and the broker may sign with it; if it was revoked because it leaked, revoke it again: POST /api/v1/gateway/keys/rotate?revoke=true with the admin token (docs/gateway.md)",
			kid))
	}
	return w
}

// CompareCredentials tells what restoring the backup at backup over the
// store in dataDir changes among credentials (CredentialChanges), so that
// restore can say what to revoke or issue again. Tokens expired at now are
// left out: they are refused either way. The broker must be stopped (the
// caller holds the data dir's lock). A data dir without a store changes
// nothing.
func CompareCredentials(ctx context.Context, dataDir, backup string, now time.Time) (*CredentialChanges, error) {
	cur := filepath.Join(dataDir, SQLiteFile)
	if _, err := os.Stat(cur); os.IsNotExist(err) {
		return &CredentialChanges{}, nil
	}
	was, err := readCredentials(ctx, stoppedStoreURL(cur), now)
	if err != nil {
		return nil, fmt.Errorf("read the store in %s: %w", dataDir, err)
	}
	will, err := readCredentials(ctx, sqliteURL(backup, "mode=ro"), now)
	if err != nil {
		return nil, fmt.Errorf("read the backup %s: %w", backup, err)
	}
	c := &CredentialChanges{
		TokensBack:             missingFrom(will.tokens, was.tokens),
		TokensGone:             missingFrom(was.tokens, will.tokens),
		RegistrationTokensBack: missingFrom(will.regTokens, was.regTokens),
		RegistrationTokensGone: missingFrom(was.regTokens, will.regTokens),
	}
	for _, h := range sortedKeys(will.hosts) {
		hash, ok := was.hosts[h]
		switch {
		case !ok:
			c.HostsBack = append(c.HostsBack, h)
		case hash != will.hosts[h]:
			c.HostsRekeyed = append(c.HostsRekeyed, h)
		}
	}
	for _, h := range sortedKeys(was.hosts) {
		if _, ok := will.hosts[h]; !ok {
			c.HostsGone = append(c.HostsGone, h)
		}
	}
	for _, kid := range slices.Sorted(maps.Keys(will.gatewayKeys)) {
		if !was.gatewayKeys[kid] {
			c.GatewayKeysBack = append(c.GatewayKeysBack, kid)
		}
	}
	return c, nil
}

// stoppedStoreURL opens the store at path of a stopped broker to read it,
// leaving it as it is for the restore to move aside: read-only, so that
// SQLite still reads the commits a killed broker left in the WAL; and
// when there is no WAL (the broker stopped cleanly), immutable, so that
// reading it makes no empty -wal and -shm beside it.
func stoppedStoreURL(path string) string {
	if _, err := os.Lstat(path + "-wal"); errors.Is(err, os.ErrNotExist) {
		return sqliteURL(path, "mode=ro", "immutable=1")
	}
	return sqliteURL(path, "mode=ro")
}

// credentials is what CompareCredentials reads of one store file.
type credentials struct {
	tokens, regTokens map[string]TokenRef
	hosts             map[HostRef]string // the credential's hash, "" when none
	gatewayKeys       map[string]bool    // by kid
}

func readCredentials(ctx context.Context, dsn string, now time.Time) (*credentials, error) {
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	c := &credentials{tokens: map[string]TokenRef{}, regTokens: map[string]TokenRef{}, hosts: map[HostRef]string{}, gatewayKeys: map[string]bool{}}
	nowNS := now.UnixNano()
	// A token's scope and groups; a backup older than them (00014,
	// 00030) has none.
	pools, err := tokenColumnOr(ctx, db, "host_pools")
	if err != nil {
		return nil, err
	}
	groups, err := tokenColumnOr(ctx, db, "groups")
	if err != nil {
		return nil, err
	}
	// A Gateway token's gateway; a backup older than 00078 has none.
	gatewayCol, err := tokenColumnOrValue(ctx, db, "gateway", `''`)
	if err != nil {
		return nil, err
	}
	rows, err := db.QueryContext(ctx, `SELECT id, role, subject, `+pools+`, `+groups+`, `+gatewayCol+`, expire_time FROM tokens WHERE expire_time IS NULL OR expire_time > ?`, nowNS)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var t TokenRef
		var pools, groups string
		var expire sql.NullInt64
		if err := rows.Scan(&t.ID, &t.Role, &t.Subject, &pools, &groups, &t.Gateway, &expire); err != nil {
			rows.Close()
			return nil, err
		}
		t.HostPools, t.Groups = parseList(pools), parseList(groups)
		if expire.Valid {
			t.ExpiresIn = time.Duration(expire.Int64 - nowNS)
		}
		c.tokens[t.ID] = t
	}
	if err := closeRows(rows); err != nil {
		return nil, err
	}
	rows, err = db.QueryContext(ctx, `SELECT id, host_pool FROM registration_tokens WHERE expire_time > ?`, nowNS)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var t TokenRef
		if err := rows.Scan(&t.ID, &t.HostPool); err != nil {
			rows.Close()
			return nil, err
		}
		c.regTokens[t.ID] = t
	}
	if err := closeRows(rows); err != nil {
		return nil, err
	}
	rows, err = db.QueryContext(ctx, `SELECT host_pool, name, COALESCE(credential_hash, '') FROM session_hosts`)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var h HostRef
		var hash string
		if err := rows.Scan(&h.HostPool, &h.Name, &hash); err != nil {
			rows.Close()
			return nil, err
		}
		c.hosts[h] = hash
	}
	if err := closeRows(rows); err != nil {
		return nil, err
	}
	// The RD gateway's signing keys; a store older than them (00040) has
	// none.
	var gateway int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'gateway_keys'`).Scan(&gateway); err != nil || gateway == 0 {
		return c, err
	}
	rows, err = db.QueryContext(ctx, `SELECT kid FROM gateway_keys`)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var kid string
		if err := rows.Scan(&kid); err != nil {
			rows.Close()
			return nil, err
		}
		c.gatewayKeys[kid] = true
	}
	return c, closeRows(rows)
}

// tokenColumnOr is the tokens table's column col, or an empty JSON list
// when the store is older than it.
func tokenColumnOr(ctx context.Context, db *sql.DB, col string) (string, error) {
	return tokenColumnOrValue(ctx, db, col, `'[]'`)
}

// tokenColumnOrValue is tokenColumnOr with the value of a missing column.
func tokenColumnOrValue(ctx context.Context, db *sql.DB, col, missing string) (string, error) {
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM pragma_table_info('tokens') WHERE name = ?`, col).Scan(&n); err != nil {
		return "", err
	}
	if n == 0 {
		return missing, nil
	}
	return col, nil
}

func closeRows(rows *sql.Rows) error {
	err := rows.Err()
	if cerr := rows.Close(); err == nil {
		err = cerr
	}
	return err
}

// missingFrom lists the tokens of a that b lacks, by id.
func missingFrom(a, b map[string]TokenRef) []TokenRef {
	var out []TokenRef
	for id, t := range a {
		if _, ok := b[id]; !ok {
			out = append(out, t)
		}
	}
	slices.SortFunc(out, func(x, y TokenRef) int { return strings.Compare(x.ID, y.ID) })
	return out
}

func sortedKeys(m map[HostRef]string) []HostRef {
	out := make([]HostRef, 0, len(m))
	for h := range m {
		out = append(out, h)
	}
	slices.SortFunc(out, func(x, y HostRef) int {
		return strings.Compare(x.HostPool+"\x00"+x.Name, y.HostPool+"\x00"+y.Name)
	})
	return out
}
