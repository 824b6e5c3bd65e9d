package store_test

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/store"
)

// TestCompareCredentialsSinceBackup: a restore puts the store back as the
// backup has it, credentials too. Each credential revoked, issued, reset
// or deleted between the backup and the restore is named (an RD gateway
// signing key revoked since, R-GW6, among them), so that restore
// can say what to do again; one that did not change, or that expired
// meanwhile (refused either way), is not. The store is read with its WAL,
// where a killed broker left the changes.
func TestCompareCredentialsSinceBackup(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	// No checkpointer: the changes stay in the WAL, as a broker killed
	// between two checkpoints leaves them.
	s, err := store.OpenWith(ctx, "", dir, nil, store.Options{CheckpointInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mustPool(t, s, pool("p", vdibroker.Pooled))
	later := t0.Add(48 * time.Hour)
	token := func(id, subject string, exp *time.Time) {
		t.Helper()
		if err := s.CreateToken(ctx, &vdibroker.Token{ID: id, Role: vdibroker.RoleReader, Subject: subject, Hash: "hash-" + id, CreateTime: t0, ExpireTime: exp}); err != nil {
			t.Fatal(err)
		}
	}
	regToken := func(id string) {
		t.Helper()
		if err := s.CreateRegistrationToken(ctx, &vdibroker.RegistrationToken{ID: id, HostPool: "p", Hash: "hash-" + id, CreateTime: t0, ExpireTime: later}); err != nil {
			t.Fatal(err)
		}
	}
	register := func(host, credential string) {
		t.Helper()
		if _, err := s.RegisterHost(ctx, "hash-reg-kept", &vdibroker.RegisterRequest{HostName: host, Address: host + ":3389"}, credential, t0); err != nil {
			t.Fatal(err)
		}
	}
	soon := t0.Add(time.Hour) // expired by the time of the restore
	token("tok-kept", "kept", nil)
	token("tok-revoked", "auditor", nil)
	token("tok-expiring-revoked", "old", &soon)
	regToken("reg-kept")
	regToken("reg-revoked")
	register("h-kept", "cred-kept")
	register("h-reset", "cred-reset-1")
	register("h-deleted", "cred-deleted")
	gatewayKey := func(kid string, at time.Time, keep int) {
		t.Helper()
		if _, err := s.AddGatewayKey(ctx, vdibroker.GatewayKey{ID: kid, Seed: make([]byte, 32), CreateTime: at}, time.Time{}, keep); err != nil {
			t.Fatal(err)
		}
	}
	gatewayKey("gk-leaked", t0, 3)

	backup := filepath.Join(t.TempDir(), "backup.db")
	if _, err := store.BackupSQLite(ctx, dir, backup); err != nil {
		t.Fatal(err)
	}

	for _, id := range []string{"tok-revoked", "tok-expiring-revoked"} {
		if err := s.DeleteToken(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	token("tok-new", "auditor", nil)
	if err := s.DeleteRegistrationToken(ctx, "p", "reg-revoked"); err != nil {
		t.Fatal(err)
	}
	regToken("reg-new")
	if err := s.ResetRegistration(ctx, "p", "h-reset"); err != nil {
		t.Fatal(err)
	}
	register("h-reset", "cred-reset-2")
	if err := s.DeleteSessionHost(ctx, "p", "h-deleted", true); err != nil {
		t.Fatal(err)
	}
	register("h-new", "cred-new")
	gatewayKey("gk-new", t0.Add(time.Minute), 1) // revokes gk-leaked (R-GW6)

	crashed := t.TempDir()
	copyTo(t, dir, crashed, store.SQLiteFile, store.SQLiteFile+"-wal")
	got, err := store.CompareCredentials(ctx, crashed, backup, t0.Add(2*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	want := &store.CredentialChanges{
		TokensBack:             []store.TokenRef{{ID: "tok-revoked", Role: vdibroker.RoleReader, Subject: "auditor"}},
		TokensGone:             []store.TokenRef{{ID: "tok-new", Role: vdibroker.RoleReader, Subject: "auditor"}},
		RegistrationTokensBack: []store.TokenRef{{ID: "reg-revoked", HostPool: "p"}},
		RegistrationTokensGone: []store.TokenRef{{ID: "reg-new", HostPool: "p"}},
		HostsBack:              []store.HostRef{{HostPool: "p", Name: "h-deleted"}},
		HostsRekeyed:           []store.HostRef{{HostPool: "p", Name: "h-reset"}},
		HostsGone:              []store.HostRef{{HostPool: "p", Name: "h-new"}},
		GatewayKeysBack:        []string{"gk-leaked"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("changes (-want +got):\n%s", diff)
	}
	if n := len(got.Warnings()); n != 8 {
		t.Errorf("%d warnings, want one a change: %q", n, got.Warnings())
	}

	// Restoring the backup over a store that is the backup changes nothing;
	// over a data dir without a store, neither.
	same := t.TempDir()
	if _, _, err := store.RestoreSQLite(ctx, same, backup, t0); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{same, t.TempDir()} {
		c, err := store.CompareCredentials(ctx, d, backup, t0.Add(2*time.Hour))
		if err != nil || !c.Empty() {
			t.Errorf("%s: %+v, %v; want no change", d, c, err)
		}
	}
}

// TestRestoreWarningReissuesTheSameToken: the warning for an API token
// issued after the backup gives the command that issues the same token
// again: its role, subject, host pools and groups. It said only
// "vdibroker token create --role Contributor", which the CLI refuses for
// want of --subject, and which, completed with the subject alone, would
// issue an unscoped token in place of one scoped to its pools (R-SEC).
func TestRestoreWarningReissuesTheSameToken(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	s, err := store.OpenWith(ctx, "", dir, nil, store.Options{CheckpointInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	backup := filepath.Join(t.TempDir(), "backup.db")
	if _, err := store.BackupSQLite(ctx, dir, backup); err != nil {
		t.Fatal(err)
	}
	for _, tk := range []*vdibroker.Token{
		{ID: "tok-scoped", Role: vdibroker.RoleContributor, Subject: "pool ops", Hash: "h1", CreateTime: t0, HostPools: []string{"pool-a", "pool b"}},
		{ID: "tok-user", Role: vdibroker.RoleUser, Subject: "o'brien@contoso.com", Hash: "h2", CreateTime: t0, Groups: []string{"Sales", "Finance"}},
	} {
		if err := s.CreateToken(ctx, tk); err != nil {
			t.Fatal(err)
		}
	}
	crashed := t.TempDir()
	copyTo(t, dir, crashed, store.SQLiteFile, store.SQLiteFile+"-wal")
	c, err := store.CompareCredentials(ctx, crashed, backup, t0)
	if err != nil {
		t.Fatal(err)
	}
	got := c.Warnings()
	want := []string{
		`API token tok-scoped (Contributor "pool ops") was issued after the backup and is gone: issue another (vdibroker token create --role Contributor --subject 'pool ops' --host-pools 'pool-a,pool b')`,
		`API token tok-user (User "o'brien@contoso.com") was issued after the backup and is gone: issue another (vdibroker token create --role User --subject 'o'\''brien@contoso.com' --groups 'Sales,Finance')`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
}

// TestRestoreWarningReissueKeepsGroupsAndExpiry (R-SEC): the command the
// warning gives issues the token that is gone, not a wider one. Its
// groups are each one value of --groups as the CLI reads the flag (a
// comma-separated list, CSV-quoted): a group "Sales, EMEA" was split into
// "Sales" and " EMEA" (refused) and "Sales,EMEA" into two groups that
// entitle another set of applications. A token that expired was reissued
// without --expires, so one that never expires; it gets the time the
// gone token had left, rounded up to a minute.
func TestRestoreWarningReissueKeepsGroupsAndExpiry(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	s, err := store.OpenWith(ctx, "", dir, nil, store.Options{CheckpointInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	backup := filepath.Join(t.TempDir(), "backup.db")
	if _, err := store.BackupSQLite(ctx, dir, backup); err != nil {
		t.Fatal(err)
	}
	expire := t0.Add(720*time.Hour - 30*time.Second)
	for _, tk := range []*vdibroker.Token{
		{ID: "tok-groups", Role: vdibroker.RoleUser, Subject: "alice", Hash: "h1", CreateTime: t0, Groups: []string{"Sales, EMEA", `The "A" team`, "$(id)"}},
		{ID: "tok-expiring", Role: vdibroker.RoleReader, Subject: "ops", Hash: "h2", CreateTime: t0, ExpireTime: &expire},
	} {
		if err := s.CreateToken(ctx, tk); err != nil {
			t.Fatal(err)
		}
	}
	crashed := t.TempDir()
	copyTo(t, dir, crashed, store.SQLiteFile, store.SQLiteFile+"-wal")
	c, err := store.CompareCredentials(ctx, crashed, backup, t0)
	if err != nil {
		t.Fatal(err)
	}
	got := c.Warnings()
	want := []string{
		`API token tok-expiring (Reader "ops") was issued after the backup and is gone: issue another (vdibroker token create --role Reader --subject 'ops' --expires 720h)`,
		`API token tok-groups (User "alice") was issued after the backup and is gone: issue another (vdibroker token create --role User --subject 'alice' --groups '"Sales, EMEA","The ""A"" team",$(id)')`,
	}
	slices.Sort(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
}

// TestRestoreWarningReissuesGatewayTokensPerGateway (R-GW4, R-SEC): a
// Gateway token issued after the backup is reissued for the gateway it
// was for. One issued before tokens named their gateway was for any
// gateway, which several may have shared, each under its own --name;
// the command the warning gave, `token create --role Gateway --subject
// S`, issues one for gateway S only, whose reports under any other name
// the broker refuses: every gateway that shared it but S was cut off.
// The warning says to issue one per gateway, each with --gateway NAME.
func TestRestoreWarningReissuesGatewayTokensPerGateway(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	s, err := store.OpenWith(ctx, "", dir, nil, store.Options{CheckpointInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	backup := filepath.Join(t.TempDir(), "backup.db")
	if _, err := store.BackupSQLite(ctx, dir, backup); err != nil {
		t.Fatal(err)
	}
	for _, tk := range []*vdibroker.Token{
		{ID: "tok-any", Role: vdibroker.RoleGateway, Subject: "gateways", Hash: "h1", CreateTime: t0},
		{ID: "tok-gw1", Role: vdibroker.RoleGateway, Subject: "gw-1", Gateway: "gw-1", Hash: "h2", CreateTime: t0},
		{ID: "tok-gw2", Role: vdibroker.RoleGateway, Subject: "edge team", Gateway: "gw-2", Hash: "h3", CreateTime: t0},
	} {
		if err := s.CreateToken(ctx, tk); err != nil {
			t.Fatal(err)
		}
	}
	crashed := t.TempDir()
	copyTo(t, dir, crashed, store.SQLiteFile, store.SQLiteFile+"-wal")
	c, err := store.CompareCredentials(ctx, crashed, backup, t0)
	if err != nil {
		t.Fatal(err)
	}
	got := c.Warnings()
	want := []string{
		`API token tok-any (Gateway "gateways") was issued after the backup and is gone; it was for no gateway in particular, and a Gateway token is now for one (R-GW4): ` +
			`issue one for each gateway that used it (vdibroker token create --role Gateway --subject 'gateways' --gateway NAME, NAME that gateway's --name)`,
		`API token tok-gw1 (Gateway "gw-1") was issued after the backup and is gone: issue another (vdibroker token create --role Gateway --subject 'gw-1')`,
		`API token tok-gw2 (Gateway "edge team") was issued after the backup and is gone: issue another (vdibroker token create --role Gateway --subject 'edge team' --gateway 'gw-2')`,
	}
	slices.Sort(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
}
