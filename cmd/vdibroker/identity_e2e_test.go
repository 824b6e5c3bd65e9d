package main

import (
	"context"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// TestAgentCertificateIsTheHosts_RSEC: with agent client certificates
// required, one host's certificate neither registers nor heartbeats
// another host (safe by default); serve --tls-client-any-host relaxes it.
func TestAgentCertificateIsTheHosts_RSEC(t *testing.T) {
	t.Setenv("VDIBROKER_ADMIN_TOKEN", "")
	dir := t.TempDir()
	ca := newTestCA(t, dir)
	srvCert, srvKey := ca.issue(t, dir, "broker", 2, false)
	cert01, key01 := ca.issue(t, dir, "sh-01", 3, true)
	cert02, key02 := ca.issue(t, dir, "sh-02", 4, true)
	for _, anyHost := range []bool{false, true} {
		m := &Main{Listen: "127.0.0.1:0", DataDir: t.TempDir(), TLSCert: srvCert, TLSKey: srvKey, TLSClientCA: ca.file, TLSClientAnyHost: anyHost}
		if err := m.Open(t.Context()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		ctx := t.Context()
		client := func(cert, key string) *vhttp.Client {
			hc, err := clientTLSOptions{CAFile: ca.file, CertFile: cert, KeyFile: key}.httpClient(m.URL(), 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			c := vhttp.NewClient(m.URL(), m.AdminToken)
			c.HTTPClient = hc
			return c
		}
		as01, as02 := client(cert01, key01), client(cert02, key02)
		if _, err := as01.PutHostPool(ctx, "certs", map[string]any{}); err != nil {
			t.Fatal(err)
		}
		rt, err := as01.CreateRegistrationToken(ctx, "certs", vhttp.RegistrationTokenRequest{ExpiresInSeconds: 3600})
		if err != nil {
			t.Fatal(err)
		}
		reg := func(c *vhttp.Client, host string) (*vdibroker.RegisterResponse, error) {
			return c.Register(ctx, &vdibroker.RegisterRequest{Token: rt.Token, HostName: host, Address: "127.0.0.1:3389"})
		}
		// sh-02's certificate registering sh-01.
		_, err = reg(as02, "sh-01")
		if anyHost {
			if err != nil {
				t.Errorf("--tls-client-any-host: sh-02's certificate registering sh-01: %v", err)
			}
			continue
		}
		if vdibroker.ErrorCode(err) != vdibroker.EPermission {
			t.Fatalf("sh-02's certificate registering sh-01: %v, want PermissionDenied", err)
		}
		own, err := reg(as01, "sh-01")
		if err != nil {
			t.Fatalf("sh-01's certificate registering sh-01: %v", err)
		}
		if _, err := as01.Heartbeat(ctx, own.Credential, &vdibroker.HeartbeatRequest{}); err != nil {
			t.Errorf("sh-01's heartbeat with its certificate: %v", err)
		}
		// sh-01's credential stolen, sent with sh-02's certificate.
		if _, err := as02.Heartbeat(ctx, own.Credential, &vdibroker.HeartbeatRequest{}); vdibroker.ErrorCode(err) != vdibroker.EPermission {
			t.Errorf("sh-01's heartbeat with sh-02's certificate: %v, want PermissionDenied", err)
		}
	}
}

// TestPreCreatedHostNeedsItsToken_RSEC: a personal desktop an admin
// created (PUT, with its user assigned) that never registered is not the
// first token holder's: a registration token of its pool, or one for
// another host, is refused; a token issued for it registers it. A token
// for one host registers no other name. A pooled host an admin created is
// claimed with a token of its pool.
func TestPreCreatedHostNeedsItsToken_RSEC(t *testing.T) {
	sp := newServedPool(t, "desks", map[string]any{"hostPoolType": "Personal", "personalDesktopAssignmentType": "Direct"})
	ctx := context.Background()
	if _, err := sp.admin.PutSessionHost(ctx, "desks", "desk-vip", vhttp.SessionHostRequest{AssignedUsers: &[]string{"vip"}}); err != nil {
		t.Fatal(err)
	}
	token := func(host string) string {
		t.Helper()
		rt, err := sp.admin.CreateRegistrationToken(ctx, "desks", vhttp.RegistrationTokenRequest{ExpiresInSeconds: 3600, SessionHost: host})
		if err != nil {
			t.Fatal(err)
		}
		if rt.SessionHost != host {
			t.Errorf("token for %q answers sessionHost %q", host, rt.SessionHost)
		}
		return rt.Token
	}
	reg := func(tok, host string) error {
		_, err := sp.admin.Register(ctx, &vdibroker.RegisterRequest{Token: tok, HostName: host, Address: host + ".example.test:3389"})
		return err
	}
	if err := reg(token(""), "desk-vip"); vdibroker.ErrorCode(err) != vdibroker.EPermission {
		t.Errorf("a token of the pool claims the pre-created desk-vip: %v, want PermissionDenied", err)
	}
	other := token("desk-other")
	if err := reg(other, "desk-vip"); vdibroker.ErrorCode(err) != vdibroker.EPermission {
		t.Errorf("desk-other's token claims desk-vip: %v, want PermissionDenied", err)
	}
	if err := reg(other, "desk-other"); err != nil {
		t.Errorf("desk-other's token registering desk-other: %v", err)
	}
	if err := reg(token("desk-vip"), "desk-vip"); err != nil {
		t.Errorf("desk-vip's token registering desk-vip: %v", err)
	}
	// A new name needs no host token: a token of the pool creates it.
	if err := reg(token(""), "desk-new"); err != nil {
		t.Errorf("a token of the pool creating desk-new: %v", err)
	}
	// A pooled host an admin created (a power driver's VM) is claimed by
	// a token of its pool: its name carries no users.
	if _, err := sp.admin.PutHostPool(ctx, "farm", map[string]any{}); err != nil {
		t.Fatal(err)
	}
	if _, err := sp.admin.PutSessionHost(ctx, "farm", "vm-1", vhttp.SessionHostRequest{}); err != nil {
		t.Fatal(err)
	}
	farmToken, err := sp.admin.CreateRegistrationToken(ctx, "farm", vhttp.RegistrationTokenRequest{ExpiresInSeconds: 3600})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sp.admin.Register(ctx, &vdibroker.RegisterRequest{Token: farmToken.Token, HostName: "vm-1", Address: "vm-1.example.test:3389"}); err != nil {
		t.Errorf("a token of the pool claiming the pre-created pooled vm-1: %v", err)
	}
	_, err = sp.admin.CreateRegistrationToken(ctx, "desks", vhttp.RegistrationTokenRequest{ExpiresInSeconds: 3600, SessionHost: "bad name!"})
	if e, ok := err.(*vdibroker.Error); !ok || e.Code != vdibroker.EInvalid || e.Field != "sessionHost" {
		t.Errorf("a token for a bad host name: %v, want InvalidArgument on sessionHost", err)
	}
	list, err := sp.admin.ListRegistrationTokens(ctx, "desks")
	if err != nil {
		t.Fatal(err)
	}
	bound := 0
	for _, rt := range list {
		if rt.SessionHost != "" {
			bound++
		}
	}
	if bound != 2 {
		t.Errorf("%d tokens list a session host, want 2: %+v", bound, list)
	}
}
