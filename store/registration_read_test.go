package store_test

import (
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/store"
)

// TestRegistrationCreatesHostAsRegisterHost_RSEC (R-SEC): the read
// RegistrationCreatesHost, which the server asks before it refuses a
// new host of a token whose new hosts are spent, answers a token's id
// and pool exactly when RegisterHost, run after it, asks AdmitNewHost:
// a new name of a valid token under its maxHosts, a name free again
// (deleted before the token was issued) too. A registration that
// RegisterHost refuses for another reason (the token unknown, expired,
// for another host, at its maxHosts; the name registered, a twin of a
// registered one, deleted after the token was issued) or that re-keys or
// claims a host answers "", so the server does not answer it 429 in the
// store's stead.
func TestRegistrationCreatesHostAsRegisterHost_RSEC(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		mustPool(t, s, pool("p", vdibroker.Pooled))
		token := func(hash string, maxHosts int, forHost string) string {
			t.Helper()
			rt := &vdibroker.RegistrationToken{HostPool: "p", Hash: hash, CreateTime: t0, ExpireTime: t0.Add(time.Hour),
				MaxHosts: maxHosts, SessionHost: forHost}
			if err := s.CreateRegistrationToken(ctx, rt); err != nil {
				t.Fatal(err)
			}
			return rt.ID
		}
		anyHost := token("rt", 0, "")
		token("rt-one", 1, "")
		only := token("rt-only", 0, "only-01")
		if _, err := s.RegisterHost(ctx, "rt", &vdibroker.RegisterRequest{HostName: "reg-01"}, "cred-reg", t0); err != nil {
			t.Fatal(err)
		}
		if _, err := s.RegisterHost(ctx, "rt-one", &vdibroker.RegisterRequest{HostName: "one-01"}, "cred-one", t0); err != nil {
			t.Fatal(err)
		}
		if _, err := s.RegisterHost(ctx, "rt", &vdibroker.RegisterRequest{HostName: "gone-01"}, "cred-gone", t0); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteSessionHost(ctx, "p", "gone-01", false); err != nil {
			t.Fatal(err)
		}
		mustHost(t, s, "p", "made-01")
		// A token issued after gone-01's delete (the store's clock):
		// the name is free again for it.
		issued := time.Now().Add(time.Hour)
		afterDelete := &vdibroker.RegistrationToken{HostPool: "p", Hash: "rt-after", CreateTime: issued, ExpireTime: issued.Add(time.Hour)}
		if err := s.CreateRegistrationToken(ctx, afterDelete); err != nil {
			t.Fatal(err)
		}

		for _, c := range []struct {
			what, hash string
			req        vdibroker.RegisterRequest
			at         time.Time
			want       string // the token's id: a new host
		}{
			{"a new name", "rt", vdibroker.RegisterRequest{HostName: "new-01"}, t0, anyHost},
			{"a new name of a token for it", "rt-only", vdibroker.RegisterRequest{HostName: "only-01"}, t0, only},
			{"an unknown token", "rt-unknown", vdibroker.RegisterRequest{HostName: "new-01"}, t0, ""},
			{"an expired token", "rt", vdibroker.RegisterRequest{HostName: "new-01"}, t0.Add(time.Hour), ""},
			{"a token for another host", "rt-only", vdibroker.RegisterRequest{HostName: "new-01"}, t0, ""},
			{"a token at its maxHosts", "rt-one", vdibroker.RegisterRequest{HostName: "new-01"}, t0, ""},
			{"a registered name", "rt", vdibroker.RegisterRequest{HostName: "reg-01"}, t0, ""},
			{"a twin of a registered name", "rt", vdibroker.RegisterRequest{HostName: "REG-01"}, t0, ""},
			{"a name deleted after the token was issued", "rt", vdibroker.RegisterRequest{HostName: "gone-01"}, t0, ""},
			{"a name deleted before the token was issued", "rt-after", vdibroker.RegisterRequest{HostName: "gone-01"}, issued, afterDelete.ID},
			{"a twin of a name deleted before the token was issued", "rt-after", vdibroker.RegisterRequest{HostName: "GONE-01."}, issued, afterDelete.ID},
			// Last, as RegisterHost takes them: they are not refused.
			{"a re-key", "rt", vdibroker.RegisterRequest{HostName: "reg-01", CurrentCredentialHash: "cred-reg"}, t0, ""},
			{"the claim of a host an admin made", "rt", vdibroker.RegisterRequest{HostName: "made-01"}, t0, ""},
		} {
			req := c.req
			id, p, err := s.RegistrationCreatesHost(ctx, c.hash, &req, c.at)
			if err != nil || id != c.want || (id != "" && p != "p") || (id == "" && p != "") {
				t.Errorf("%s: RegistrationCreatesHost %q, %q, %v; want %q", c.what, id, p, err, c.want)
			}
			// RegisterHost asks AdmitNewHost for the same token, or not
			// at all; its refusal leaves the store as it was.
			asked := ""
			req.AdmitNewHost = func(tokenID string) error {
				asked = tokenID
				return vdibroker.Errorf(vdibroker.ETooManyRequests, "refused by the test")
			}
			_, err = s.RegisterHost(ctx, c.hash, &req, "cred-"+c.what, c.at)
			if asked != c.want {
				t.Errorf("%s: RegisterHost asked AdmitNewHost for %q (%v); want %q", c.what, asked, err, c.want)
			}
		}
	})
}
