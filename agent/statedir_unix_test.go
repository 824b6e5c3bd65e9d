//go:build unix

package agent

import (
	"os"
	"path/filepath"
	"testing"
)

// The state directory keeps the host credential (R-SEC): one that another
// user made first (in a directory she may write, such as /tmp), or a link
// she put in its place, would be hers to read; the agent refuses both
// rather than write the credential there. A link the agent's own user (or
// root) made, as when the state moved to another disk, is followed.
func TestStateDirRefusesLinkAndForeignOwner(t *testing.T) {
	cred := &savedCredential{Server: "https://b", HostName: "h", Credential: "vdbh_secret"}

	moved := t.TempDir()
	link := filepath.Join(t.TempDir(), "state")
	if err := os.Symlink(moved, link); err != nil {
		t.Fatal(err)
	}
	if err := saveCredential(link, cred); err != nil {
		t.Errorf("state directory that is the agent's own link: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(moved, credentialFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the credential in the link's target: %v, %v; want mode 0600", fi, err)
	}
	if fi, err := os.Stat(moved); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("the link's target: %v, %v; want mode 0700", fi, err)
	}

	if os.Geteuid() != 0 {
		t.Skip("giving a directory to another user needs root")
	}
	// A link another user made, to a directory of hers or to one of
	// root's that others read (as /etc), which must not become 0700.
	shared := filepath.Join(t.TempDir(), "shared")
	if err := os.Mkdir(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	hers := t.TempDir()
	if err := os.Chown(hers, 12345, 12345); err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{hers, shared} {
		elsewhere := filepath.Join(t.TempDir(), "state")
		if err := os.Symlink(target, elsewhere); err != nil {
			t.Fatal(err)
		}
		if err := os.Lchown(elsewhere, 12345, 12345); err != nil {
			t.Fatal(err)
		}
		before, _ := os.Stat(target)
		if err := saveCredential(elsewhere, cred); err == nil {
			t.Errorf("state directory that is another user's link to %s: saved", target)
		}
		if _, err := os.Stat(filepath.Join(target, credentialFile)); err == nil {
			t.Errorf("the credential went to %s through another user's link", target)
		}
		if after, _ := os.Stat(target); after.Mode() != before.Mode() {
			t.Errorf("another user's link made %s %v (was %v)", target, after.Mode(), before.Mode())
		}
	}

	theirs := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(theirs, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(theirs, 12345, 12345); err != nil {
		t.Fatal(err)
	}
	if err := saveCredential(theirs, cred); err == nil {
		t.Error("state directory of another user: saved")
	}
	if _, err := os.Stat(filepath.Join(theirs, credentialFile)); err == nil {
		t.Error("the credential went into another user's directory")
	}

	ours := filepath.Join(t.TempDir(), "a", "state")
	if err := saveCredential(ours, cred); err != nil {
		t.Fatalf("new state directory: %v", err)
	}
	if fi, err := os.Stat(ours); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("state directory %v, %v; want mode 0700", fi.Mode(), err)
	}
}
