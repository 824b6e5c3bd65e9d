package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/vdibroker/vdibroker"
)

// CreateToken stores an API token (its hash only).
func (s *DB) CreateToken(ctx context.Context, tk *vdibroker.Token) error {
	if tk.ID == "" {
		tk.ID = vdibroker.NewID()
	}
	if tk.Hash == "" {
		return vdibroker.Errorf(vdibroker.EInvalid, "token hash is empty")
	}
	err := s.write(ctx, func(t *tx) error {
		_, err := t.exec(ctx, `INSERT INTO tokens (id, role, subject, hash, create_time, expire_time, host_pools, groups, gateway) VALUES (?,?,?,?,?,?,?,?,?)`,
			tk.ID, tk.Role, tk.Subject, tk.Hash, ns(tk.CreateTime), nsPtr(tk.ExpireTime), list(tk.HostPools), list(tk.Groups), tk.Gateway)
		if err != nil && errors.Is(err, errUnique) {
			return vdibroker.Errorf(vdibroker.EConflict, "token already exists")
		}
		t.audited(nil, tk) // Hash is not marshalled
		return err
	})
	return wrap(err, "create token")
}

const tokenCols = `id, role, subject, hash, create_time, expire_time, host_pools, groups, gateway`

func scanToken(sc scanner) (*vdibroker.Token, error) {
	var tk vdibroker.Token
	var ct int64
	var et sql.NullInt64
	var pools, groups string
	if err := sc.Scan(&tk.ID, &tk.Role, &tk.Subject, &tk.Hash, &ct, &et, &pools, &groups, &tk.Gateway); err != nil {
		return nil, err
	}
	tk.HostPools, tk.Groups = parseList(pools), parseList(groups)
	tk.CreateTime, tk.ExpireTime = fromNS(ct), fromNSPtr(et)
	return &tk, nil
}

// TokenByHash implements vdibroker.Store: an API token by its hash, or a
// revoked one (RevokeTime set); Unauthenticated when none. Expiry is the
// caller's to check (ExpireTime), against its own clock.
func (s *DB) TokenByHash(ctx context.Context, hash string) (*vdibroker.Token, error) {
	var tk *vdibroker.Token
	err := s.read(ctx, func(t *tx) (err error) {
		tk, err = scanToken(t.row(ctx, `SELECT `+tokenCols+` FROM tokens WHERE hash = ?`, hash))
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		// Only the whole secret's hash finds a revoked token's row.
		var r vdibroker.Token
		var at int64
		if err := t.row(ctx, `SELECT id, hash, revoke_time FROM revoked_tokens WHERE hash = ?`, hash).Scan(&r.ID, &r.Hash, &at); err != nil {
			return err
		}
		revoked := fromNS(at)
		r.RevokeTime, tk = &revoked, &r
		return nil
	})
	if errors.Is(err, sql.ErrNoRows) || hash == "" {
		return nil, vdibroker.Errorf(vdibroker.EUnauthenticated, "unknown token")
	}
	if err != nil {
		return nil, fmt.Errorf("token by hash: %w", err)
	}
	return tk, nil
}

// ListTokens lists API tokens by creation time, then id.
func (s *DB) ListTokens(ctx context.Context) ([]*vdibroker.Token, error) {
	var out []*vdibroker.Token
	err := s.read(ctx, func(t *tx) (err error) {
		out, err = queryAll(ctx, t, scanToken, `SELECT `+tokenCols+` FROM tokens ORDER BY create_time, id`)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	return out, nil
}

// DeleteToken implements vdibroker.Store: it deletes an API token and
// keeps its hash in revoked_tokens (migration 00071) until PruneHistory
// passes its revocation (NotFound when none).
func (s *DB) DeleteToken(ctx context.Context, id string) error {
	err := s.write(ctx, func(t *tx) error {
		old, err := scanToken(t.row(ctx, `SELECT `+tokenCols+` FROM tokens WHERE id = ?`, id))
		if errors.Is(err, sql.ErrNoRows) {
			return notFound("token %q not found", id)
		}
		if err != nil {
			return err
		}
		if _, err := t.exec(ctx, `DELETE FROM tokens WHERE id = ?`, id); err != nil {
			return err
		}
		// A restored backup may hold the token again after it was revoked
		// once: its second revocation is the one remembered.
		if _, err := t.exec(ctx, `INSERT INTO revoked_tokens (hash, id, revoke_time) VALUES (?,?,?)
			ON CONFLICT (hash) DO UPDATE SET id = excluded.id, revoke_time = excluded.revoke_time`, old.Hash, old.ID, ns(s.now())); err != nil {
			return err
		}
		t.audited(old, nil)
		return nil
	})
	return wrap(err, "delete token %s", id)
}

// CreateRegistrationToken stores a registration token for an existing pool.
func (s *DB) CreateRegistrationToken(ctx context.Context, rt *vdibroker.RegistrationToken) error {
	if rt.ID == "" {
		rt.ID = vdibroker.NewID()
	}
	if rt.Hash == "" {
		return vdibroker.Errorf(vdibroker.EInvalid, "registration token hash is empty")
	}
	err := s.write(ctx, func(t *tx) error {
		if _, err := t.getPool(ctx, rt.HostPool); err != nil {
			return err
		}
		// A token for OFFICE-01 beside office-01 would register nothing:
		// it registers OFFICE-01 only, and every registration of that
		// name is refused as office-01's twin (R-SEC). A token for
		// office-01 as written is one to claim or re-register that host.
		if rt.SessionHost != "" {
			_, err := t.getHost(ctx, rt.HostPool, rt.SessionHost, false)
			if other := sameNameOf(err); other != "" {
				return sameNameTokenConflict(rt.HostPool, rt.SessionHost, other)
			}
			if err != nil && vdibroker.ErrorCode(err) != vdibroker.ENotFound {
				return err
			}
		}
		_, err := t.exec(ctx, `INSERT INTO registration_tokens (id, host_pool, hash, create_time, expire_time, max_hosts, session_host)
			VALUES (?,?,?,?,?,?,?)`,
			rt.ID, rt.HostPool, rt.Hash, ns(rt.CreateTime), ns(rt.ExpireTime), rt.MaxHosts, rt.SessionHost)
		if err != nil && errors.Is(err, errUnique) {
			return vdibroker.Errorf(vdibroker.EConflict, "registration token already exists")
		}
		t.audited(nil, rt)
		return err
	})
	return wrap(err, "create registration token for %q", rt.HostPool)
}

// registration is what the checks of a registration (checkRegistration)
// found: its token and, when the name is taken, the host it re-keys or
// claims (nil: the registration creates the host).
type registration struct {
	tokenID, pool string
	maxHosts      int
	host          *vdibroker.SessionHost
}

// checkRegistration runs the checks of RegisterHost on t, in its order,
// up to the host's creation: the token (known, not expired, for this
// name when it is for one host), the name (no host of it in another case,
// none registered already unless req carries its credential, an admin's
// personal desktop claimed only by a token for it, none deleted after the
// token was issued). Its error is the refusal. With lock (RegisterHost's
// write) the host's row is locked and the token's place of maxHosts is
// left to RegisterHost, which counts and checks it in one statement; a
// read (lock false) checks the place too, refusing as RegisterHost would.
func (t *tx) checkRegistration(ctx context.Context, tokenHash string, req *vdibroker.RegisterRequest, now time.Time, lock bool) (*registration, error) {
	var rg registration
	var forHost string
	var exp, issued int64
	var hosts int
	err := t.row(ctx, `SELECT id, host_pool, expire_time, create_time, max_hosts, hosts, session_host FROM registration_tokens WHERE hash = ?`,
		tokenHash).Scan(&rg.tokenID, &rg.pool, &exp, &issued, &rg.maxHosts, &hosts, &forHost)
	if errors.Is(err, sql.ErrNoRows) || tokenHash == "" {
		return nil, vdibroker.Errorf(vdibroker.EUnauthenticated, "invalid registration token")
	}
	if err != nil {
		return nil, err
	}
	if !now.Before(fromNS(exp)) {
		return nil, vdibroker.Errorf(vdibroker.EUnauthenticated, "registration token expired at %s", fromNS(exp).Format(time.RFC3339))
	}
	pool := rg.pool
	if t.audit != nil {
		t.audit.Principal.ID = rg.tokenID
		t.audit.HostPool, t.audit.Target = pool, "hostpools/"+pool+"/sessionhosts/"+req.HostName
	}
	if forHost != "" && forHost != req.HostName {
		return nil, vdibroker.Errorf(vdibroker.EPermission, "registration token %s is for session host %q only, not %q", rg.tokenID, forHost, req.HostName)
	}
	var cred sql.NullString
	h, err := t.getHostAnd(ctx, pool, req.HostName, lock, &cred)
	if other := sameNameOf(err); other != "" {
		// OFFICE-01 or office-01. beside office-01 (R-SEC): refused
		// as office-01 itself is when registered. Two such
		// registrations at once meet in the unique index
		// session_hosts_name_key (R-D3): the second runs again
		// (errRaced) and ends here.
		return nil, sameNameConflict("hostName", pool, req.HostName, other)
	}
	if err != nil && vdibroker.ErrorCode(err) != vdibroker.ENotFound {
		return nil, err
	}
	if err == nil && cred.String != "" && cred.String != req.CurrentCredentialHash {
		// Registered already: only the host itself (its current
		// credential) or an admin's reset may re-key it (R-SEC).
		return nil, &vdibroker.Error{Code: vdibroker.EConflict, Field: "hostName", Message: fmt.Sprintf("session host %q is registered already: an agent re-keys it with its current credential; "+
			"to replace the machine, an admin resets its registration (POST .../sessionhosts/%s/resetregistration)", req.HostName, req.HostName)}
	}
	if err == nil && cred.String == "" && forHost == "" {
		var awaits bool
		if err := t.row(ctx, `SELECT awaits_host_token FROM session_hosts WHERE host_pool = ? AND name = ?`, pool, req.HostName).Scan(&awaits); err != nil {
			return nil, err
		}
		if awaits {
			// An admin made this personal desktop and no agent ever
			// registered it: the first holder of any token of the
			// pool must not become it (and its users' desktop).
			return nil, vdibroker.Errorf(vdibroker.EPermission, "personal session host %q was created by an admin and has never registered: it is claimed only "+
				"with a registration token issued for it (POST .../registrationtoken {\"sessionHost\": %q}, "+
				"vdibroker registration-token create --host-pool %s --session-host %s)", req.HostName, req.HostName, pool, req.HostName)
		}
	}
	if err == nil {
		rg.host = h
		return &rg, nil
	}
	// A deleted host under any case of its name (R-SEC): OFFICE-01 is
	// the machine office-01 was.
	var deletedName string
	var deleted int64
	switch derr := t.row(ctx, deletedHostQuery, pool, vdibroker.HostNameKey(req.HostName)).Scan(&deletedName, &deleted); {
	case derr == nil && deleted >= issued:
		as := ""
		if deletedName != req.HostName {
			as = fmt.Sprintf(" (as %q, the same name ignoring case and a trailing dot)", deletedName)
		}
		return nil, vdibroker.Errorf(vdibroker.EConflict, "session host %q was deleted%s at %s, after this registration token was issued: "+
			"register it again with a new registration token", req.HostName, as, fromNS(deleted).Format(time.RFC3339))
	case derr != nil && !errors.Is(derr, sql.ErrNoRows):
		return nil, derr
	}
	if !lock && rg.maxHosts != 0 && hosts >= rg.maxHosts {
		return nil, maxHostsReached(rg.tokenID, rg.maxHosts)
	}
	return &rg, nil
}

// maxHostsReached refuses a new host of token id, which has registered
// its maxHosts.
func maxHostsReached(id string, maxHosts int) error {
	return vdibroker.Errorf(vdibroker.EPermission, "registration token %s has registered its %s (maxHosts); issue a new one", id, vdibroker.Plural(maxHosts, "host"))
}

// RegistrationCreatesHost implements vdibroker.Store: RegisterHost's
// checks (checkRegistration) in a read, no write transaction.
func (s *DB) RegistrationCreatesHost(ctx context.Context, tokenHash string, req *vdibroker.RegisterRequest, now time.Time) (tokenID, pool string, err error) {
	var rg *registration
	err = s.read(ctx, func(t *tx) (err error) {
		rg, err = t.checkRegistration(ctx, tokenHash, req, now, false)
		return err
	})
	var refused *vdibroker.Error
	switch {
	case err == nil && rg.host == nil:
		return rg.tokenID, rg.pool, nil
	case err == nil || errors.As(err, &refused):
		return "", "", nil // a re-key, a claim, or refused
	}
	return "", "", fmt.Errorf("registration creates host %q: %w", req.HostName, err)
}

// RegisterHost checks a registration token by hash and expiry, then creates
// the named host in the token's pool or re-keys the existing one: the new
// credential hash replaces the old, which stops working at once. Agent
// fields (address, protocols, standardFeatures when sent, policy when sent)
// are taken from req. A token for one session host registers that name
// only, and a host an admin created that never registered is claimed only
// by such a token (R-SEC).
func (s *DB) RegisterHost(ctx context.Context, tokenHash string, req *vdibroker.RegisterRequest, credentialHash string, now time.Time) (*vdibroker.SessionHost, error) {
	if credentialHash == "" {
		return nil, vdibroker.Errorf(vdibroker.EInvalid, "credential hash is empty")
	}
	var out *vdibroker.SessionHost
	err := s.write(ctx, func(t *tx) error {
		rg, err := t.checkRegistration(ctx, tokenHash, req, now, true)
		if err != nil {
			return err
		}
		pool, h := rg.pool, rg.host
		var before *vdibroker.SessionHost
		if h != nil {
			b := *h
			before = &b
		}
		t.touch(pool, req.HostName) // a re-key revokes the old credential
		if h == nil {
			// Counted and checked in one statement, so two registrations
			// racing on one token (PostgreSQL's READ COMMITTED) cannot both
			// take its last place.
			n, uerr := t.exec(ctx, `UPDATE registration_tokens SET hosts = hosts + 1
				WHERE id = ? AND (max_hosts = 0 OR hosts < max_hosts)`, rg.tokenID)
			if uerr != nil {
				return uerr
			}
			if n == 0 {
				return maxHostsReached(rg.tokenID, rg.maxHosts)
			}
			if _, err := t.exec(ctx, `DELETE FROM deleted_hosts WHERE host_pool = ? AND `+hostNameKeySQL+` = ?`, pool, vdibroker.HostNameKey(req.HostName)); err != nil {
				return err
			}
			h = &vdibroker.SessionHost{HostPool: pool, Name: req.HostName, StandardFeatures: true, AllowNewSession: true, CreateTime: now}
			if req.StandardFeatures != nil {
				h.StandardFeatures = *req.StandardFeatures
			}
			if req.Policy != nil {
				h.Policy = *req.Policy
			}
			h.RemoteApps = vdibroker.RemoteAppsFrom(req.RemoteApps, "")
			_, err = t.exec(ctx, `INSERT INTO session_hosts (host_pool, name, address, protocols,
				standard_features, allow_new_session, assigned_users, policy, create_time, credential_hash, remote_apps)
				VALUES (?,?,?,?,?,?,?,?,?,?,?)`,
				pool, req.HostName, req.Address, list(req.Protocols), h.StandardFeatures, true,
				list(nil), jsonText(h.Policy), ns(now), credentialHash, h.RemoteApps)
			if err == nil {
				err = t.insertCounts(ctx, pool, req.HostName, true)
			}
			if err == nil && req.AdmitNewHost != nil {
				// Last, once the host's row is in: a refusal above says
				// why before a rate does, and a registration that loses
				// the name to another at once (PostgreSQL: its insert
				// waits for the other's commit, then fails on the unique
				// name and runs again as a re-key or refused) spends
				// none of its token's new hosts, not even while it waits
				// (R-SEC). Its error rolls the host and the count back.
				err = req.AdmitNewHost(rg.tokenID)
			}
		} else {
			if req.StandardFeatures != nil {
				h.StandardFeatures = *req.StandardFeatures
			}
			if req.Policy != nil {
				h.Policy = *req.Policy
			}
			// An agent that says nothing keeps what the host had (R-E12).
			h.RemoteApps = vdibroker.RemoteAppsFrom(req.RemoteApps, h.RemoteApps)
			_, err = t.exec(ctx, `UPDATE session_hosts SET address = ?, protocols = ?, standard_features = ?,
				policy = ?, credential_hash = ?, shutting_down = ?, awaits_host_token = FALSE, remote_apps = ? WHERE host_pool = ? AND name = ?`,
				req.Address, list(req.Protocols), h.StandardFeatures, jsonText(h.Policy), credentialHash,
				false, h.RemoteApps, pool, req.HostName)
		}
		if err != nil {
			if errors.Is(err, errUnique) {
				// A concurrent registration (or PUT) of the same name: run
				// again and re-key. (A credential hash collision, which
				// 256-bit secrets make impossible in practice, would fail
				// every attempt and end as an internal error.)
				return errRaced
			}
			return err
		}
		out, err = t.getHost(ctx, pool, req.HostName, false)
		if err == nil {
			t.cacheHost(credentialHash, out)
			if before != nil && t.audit != nil {
				t.audit.Action = "sessionhost.rekey"
			}
			t.audited(before, out)
		}
		return err
	})
	if err != nil {
		return nil, wrap(err, "register host %q", req.HostName)
	}
	return out, nil
}

// HostByCredential finds the host a credential hash belongs to.
func (s *DB) HostByCredential(ctx context.Context, credentialHash string) (*vdibroker.SessionHost, error) {
	if credentialHash == "" {
		return nil, vdibroker.Errorf(vdibroker.EUnauthenticated, "unknown host credential")
	}
	var seq uint64
	if s.hosts != nil {
		var h *vdibroker.SessionHost
		if h, seq = s.hosts.get(credentialHash); h != nil {
			return h, nil
		}
	}
	var h *vdibroker.SessionHost
	err := s.read(ctx, func(t *tx) (err error) {
		h, err = scanHost(t.row(ctx, hostByCredentialQuery, credentialHash))
		return err
	})
	if errors.Is(err, sql.ErrNoRows) {
		return nil, vdibroker.Errorf(vdibroker.EUnauthenticated, "unknown host credential")
	}
	if err != nil {
		return nil, fmt.Errorf("host by credential: %w", err)
	}
	if s.hosts != nil {
		s.hosts.fill(credentialHash, h, seq)
	}
	return h, nil
}

// ListRegistrationTokens implements vdibroker.Store.
func (s *DB) ListRegistrationTokens(ctx context.Context, pool string) ([]*vdibroker.RegistrationToken, error) {
	var out []*vdibroker.RegistrationToken
	err := s.read(ctx, func(t *tx) error {
		if _, err := t.getPool(ctx, pool); err != nil {
			return err
		}
		var err error
		out, err = queryAll(ctx, t, func(sc scanner) (*vdibroker.RegistrationToken, error) {
			var rt vdibroker.RegistrationToken
			var ct, et int64
			if err := sc.Scan(&rt.ID, &rt.HostPool, &ct, &et, &rt.MaxHosts, &rt.Hosts, &rt.SessionHost); err != nil {
				return nil, err
			}
			rt.CreateTime, rt.ExpireTime = fromNS(ct), fromNS(et)
			return &rt, nil
		}, `SELECT id, host_pool, create_time, expire_time, max_hosts, hosts, session_host FROM registration_tokens
			WHERE host_pool = ? ORDER BY create_time, id`, pool)
		return err
	})
	return out, wrap(err, "list registration tokens of %q", pool)
}

// DeleteRegistrationToken implements vdibroker.Store.
func (s *DB) DeleteRegistrationToken(ctx context.Context, pool, id string) error {
	err := s.write(ctx, func(t *tx) error {
		n, err := t.exec(ctx, `DELETE FROM registration_tokens WHERE host_pool = ? AND id = ?`, pool, id)
		if err != nil {
			return err
		}
		if n == 0 {
			return notFound("registration token %q not found in host pool %q", id, pool)
		}
		t.audited(map[string]string{"id": id, "hostPool": pool}, nil)
		return nil
	})
	return wrap(err, "delete registration token %s/%s", pool, id)
}

// ResetRegistration implements vdibroker.Store.
func (s *DB) ResetRegistration(ctx context.Context, pool, host string) error {
	err := s.write(ctx, func(t *tx) error {
		if _, err := t.getHost(ctx, pool, host, true); err != nil {
			return err
		}
		t.touch(pool, host) // the old credential stops working at commit
		_, err := t.exec(ctx, `UPDATE session_hosts SET credential_hash = NULL WHERE host_pool = ? AND name = ?`, pool, host)
		t.audited(map[string]any{"registered": true}, map[string]any{"registered": false})
		return err
	})
	return wrap(err, "reset the registration of %s/%s", pool, host)
}
