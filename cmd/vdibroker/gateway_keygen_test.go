package main

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker/gatewaytoken"
)

// runKeygen runs `gateway keygen` with its three flags.
func runKeygen(t *testing.T, keyID, keyFile, jwksFile string) error {
	t.Helper()
	cmd := newGatewayKeygenCmd()
	cmd.SetArgs([]string{"--key-id", keyID, "--private-key", keyFile, "--jwks", jwksFile})
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	return cmd.Execute()
}

// jwksKeys reads the keys of the JWKS file path.
func jwksKeys(t *testing.T, path string) map[string]ed25519.PublicKey {
	t.Helper()
	ks, err := (gatewaytoken.FileSource{Path: path}).Keys(t.Context())
	if err != nil {
		t.Fatalf("the JWKS file: %v", err)
	}
	return ks.Keys()
}

// TestGatewayKeygenAddsToJWKS_RGW6 (R-GW6): keygen adds its key to an
// existing JWKS file, keeping the file's other keys as they were, so
// docs/gateway.md's rotation (publish the new key beside the current
// one) is keygen run again; it refuses a key id the file has and a file
// that is not a JWKS, naming them, before it writes anything: no key
// file, the JWKS file unchanged.
func TestGatewayKeygenAddsToJWKS_RGW6(t *testing.T) {
	full := map[string]ed25519.PublicKey{}
	for i := range gatewaytoken.MaxKeys {
		pub, _, _ := ed25519.GenerateKey(nil)
		full[string(rune('a'+i))] = pub
	}
	fullDoc, err := gatewaytoken.MarshalJWKS(full)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		before  []byte // the JWKS file before keygen k2; nil: keygen k1 made it
		want    string // the refusal; "": k2 added
		wantIDs []string
	}{
		{name: "beside the current key", wantIDs: []string{"k1", "k2"}},
		{name: "a file of other keys", before: testKeysDoc(t), wantIDs: []string{"k", "k2"}},
		{name: "its key id there already", before: []byte(`{"keys":[{"kty":"OKP","crv":"Ed25519","kid":"k2","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}]}`),
			want: `already has key id "k2": give another --key-id`},
		{name: "not JSON", before: []byte("gateway.example.com\n"), want: "is not a JWKS file of Ed25519 keys"},
		{name: "JSON, no keys", before: []byte(`{"keys": []}`), want: "is not a JWKS file of Ed25519 keys"},
		{name: "an empty file", before: []byte{}, want: "is not a JWKS file of Ed25519 keys"},
		// 16 keys, at most 16 (gatewaytoken.MaxKeys): one must go first.
		{name: "full", before: fullDoc, want: "remove a key no token is signed with any more first"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			jwks := filepath.Join(dir, "gateway-keys.json")
			if tc.before == nil {
				if err := runKeygen(t, "k1", filepath.Join(dir, "k1.pem"), jwks); err != nil {
					t.Fatal(err)
				}
			} else if err := os.WriteFile(jwks, tc.before, 0o640); err != nil {
				t.Fatal(err)
			}
			before, err := os.ReadFile(jwks)
			if err != nil {
				t.Fatal(err)
			}
			fiBefore, _ := os.Stat(jwks)
			key2 := filepath.Join(dir, "k2.pem")
			err = runKeygen(t, "k2", key2, jwks)
			if tc.want != "" {
				var ue usageError
				if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "--jwks "+jwks) {
					t.Errorf("keygen = %v, want a usage error naming --jwks %s, %q", err, jwks, tc.want)
				}
				if after, _ := os.ReadFile(jwks); !bytes.Equal(after, before) {
					t.Errorf("the refused JWKS file was rewritten:\n%s", after)
				}
				if _, err := os.Stat(key2); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("a refused keygen left its key file: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("keygen k2 = %v", err)
			}
			was, _ := gatewaytoken.ParseJWKS(before)
			got := jwksKeys(t, jwks)
			ks, _ := gatewaytoken.NewKeySet(got)
			ids := ks.KeyIDs()
			if strings.Join(ids, ",") != strings.Join(tc.wantIDs, ",") {
				t.Fatalf("keys %v, want %v", ids, tc.wantIDs)
			}
			for kid, pub := range was.Keys() {
				if !pub.Equal(got[kid]) {
					t.Errorf("key %s changed", kid)
				}
			}
			if fi, err := os.Stat(jwks); err != nil || fi.Mode().Perm() != fiBefore.Mode().Perm() {
				t.Errorf("the JWKS file's mode: %v, %v; want %v as it was", fi.Mode(), err, fiBefore.Mode())
			}
			// The new key signs tokens the file verifies.
			pem, err := os.ReadFile(key2)
			if err != nil {
				t.Fatal(err)
			}
			priv, err := gatewaytoken.ParsePrivateKeyPEM(pem)
			if err != nil || !priv.Public().(ed25519.PublicKey).Equal(got["k2"]) {
				t.Errorf("k2.pem: %v; want the private key of the JWKS file's k2", err)
			}
			// Nothing left beside it: the temporary file was renamed.
			if ents, _ := os.ReadDir(dir); len(ents) != len(tc.wantIDs)+1-boolInt(tc.before != nil) {
				var names []string
				for _, e := range ents {
					names = append(names, e.Name())
				}
				t.Errorf("files %v; want the JWKS file and the keys' files only", names)
			}
		})
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestGatewayKeygenRemovesItsKeyOnFailure (R-SEC): a keygen whose JWKS
// file cannot be written (its folder does not exist) leaves no private
// key behind, whose public half no gateway would know and whose file
// would refuse the same command run again.
func TestGatewayKeygenRemovesItsKeyOnFailure(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "k1.pem")
	if err := runKeygen(t, "k1", key, filepath.Join(dir, "no-such-dir", "keys.json")); err == nil {
		t.Fatal("keygen into a folder that does not exist succeeded")
	}
	if _, err := os.Stat(key); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the key file after the failed keygen: %v, want none", err)
	}
	if err := runKeygen(t, "k1", key, filepath.Join(dir, "keys.json")); err != nil {
		t.Errorf("keygen again: %v", err)
	}
}

// TestGatewayKeysFileAcceptsBothKeysAfterKeygen_RGW6 (R-GW6): a gateway
// reading its keys from the file keygen wrote (--keys-file) accepts,
// once it reads the file again after a second keygen, the tokens of
// both keys: those of the key in use still, and the new key's.
func TestGatewayKeysFileAcceptsBothKeysAfterKeygen_RGW6(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, dir)
	cert, tlsKey := ca.issue(t, dir, "gateway", 2, false)
	jwks := filepath.Join(dir, "gateway-keys.json")
	k1, k2 := filepath.Join(dir, "k1.pem"), filepath.Join(dir, "k2.pem")
	if err := runKeygen(t, "k1", k1, jwks); err != nil {
		t.Fatal(err)
	}
	m := &GatewayMain{Listen: "127.0.0.1:0", TLSCert: cert, TLSKey: tlsKey, Name: "rdgw-keygen", KeysFile: jwks, KeysRefresh: time.Minute}
	if err := m.Open(t.Context()); err != nil {
		t.Fatalf("the gateway did not start: %v", err)
	}
	defer m.Close()
	sign := func(keyID, keyFile string) string {
		t.Helper()
		var out bytes.Buffer
		cmd := newGatewayTokenCmd()
		cmd.SetArgs([]string{"--key-id", keyID, "--private-key", keyFile, "--user", "alice", "--host", "10.0.0.12:3389"})
		cmd.SetOut(&out)
		cmd.SetErr(io.Discard)
		if err := cmd.Execute(); err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(out.String())
	}
	tok1 := sign("k1", k1)
	if _, err := m.keys.Verify(tok1, time.Now()); err != nil {
		t.Fatalf("k1's token before the rotation: %v", err)
	}
	if err := runKeygen(t, "k2", k2, jwks); err != nil {
		t.Fatal(err)
	}
	if err := m.keys.Reload(t.Context()); err != nil {
		t.Fatalf("the gateway's read of the file keygen wrote: %v", err)
	}
	for name, tok := range map[string]string{"k1 (in use)": tok1, "k2 (new)": sign("k2", k2)} {
		if _, err := m.keys.Verify(tok, time.Now()); err != nil {
			t.Errorf("%s's token after the second keygen: %v, want accepted", name, err)
		}
	}
}

// TestGatewayKeygenRefusesOneFileForBoth (R-SEC): --private-key and
// --jwks naming one file (a slip of the operator's) are refused, and
// leave no file: the JWKS file's rename would replace the private key
// just written, and keygen report success with the key lost.
func TestGatewayKeygenRefusesOneFileForBoth(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "gateway.json")
	for _, other := range []string{path, filepath.Join(dir, ".", "gateway.json")} {
		err := runKeygen(t, "k1", path, other)
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "are the same file") {
			t.Errorf("keygen --private-key %s --jwks %s = %v, want a usage error: the same file", path, other, err)
		}
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the refused keygen left %s: %v", path, err)
		}
	}
}

// TestGatewayKeygenKeepsJWKSLink_RGW6 (R-GW6): a JWKS file reached
// through a symbolic link (the gateway's --keys-file a link to where the
// keys are kept) gets the key in the file the link names; the link
// stays a link, not replaced by a file of its own.
func TestGatewayKeygenKeepsJWKSLink_RGW6(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("symbolic links need a privilege on Windows")
	}
	dir := t.TempDir()
	real := filepath.Join(dir, "keys", "current.json")
	if err := os.Mkdir(filepath.Dir(real), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := runKeygen(t, "k1", filepath.Join(dir, "k1.pem"), real); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "gateway-keys.json")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	if err := runKeygen(t, "k2", filepath.Join(dir, "k2.pem"), link); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("--jwks %s after keygen: %v, %v; want the link still", link, fi.Mode(), err)
	}
	got := jwksKeys(t, real)
	if len(got) != 2 || got["k1"] == nil || got["k2"] == nil {
		t.Errorf("keys of the linked file %v, want k1 and k2", got)
	}
}

// TestWriteFileAtomic (R-SEC): the file is written through a temporary
// file of a new random name beside it, never a name an attacker could
// have made first (path+".tmp", a link to a file of the victim's: the
// write would go through it); the file has the mode asked for, not the
// mode of the file it replaces (an .rdp file holds a gateway token:
// 0600 over an earlier 0644); nothing is left beside it, after a
// failure neither.
func TestWriteFileAtomic(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("modes and symbolic links: POSIX")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "alice.rdp")
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("victim's"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, path+".tmp"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeFileAtomic(path, []byte("token"), 0o600); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(victim); string(data) != "victim's" {
		t.Errorf("the file a planted %s.tmp link names was written: %q", path, data)
	}
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode() != 0o600 {
		t.Fatalf("%s: %v, %v; want a file of mode 0600", path, fi.Mode(), err)
	}
	if data, _ := os.ReadFile(path); string(data) != "token" {
		t.Errorf("%s holds %q, want the new text", path, data)
	}
	// A failed rename (onto a folder that is not empty) leaves no
	// temporary file.
	sub := filepath.Join(dir, "sub")
	if err := os.MkdirAll(filepath.Join(sub, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := writeFileAtomic(sub, []byte("x"), 0o600); err == nil {
		t.Fatal("writeFileAtomic over a folder succeeded")
	}
	ents, _ := os.ReadDir(dir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if strings.Join(names, ",") != "alice.rdp,alice.rdp.tmp,sub,victim" {
		t.Errorf("files %v, want alice.rdp, the planted link, sub and victim only", names)
	}
}
