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
// rather than write the credential there.
func TestStateDirRefusesLinkAndForeignOwner(t *testing.T) {
	cred := &savedCredential{Server: "https://b", HostName: "h", Credential: "vdbh_secret"}

	elsewhere := t.TempDir()
	link := filepath.Join(t.TempDir(), "state")
	if err := os.Symlink(elsewhere, link); err != nil {
		t.Fatal(err)
	}
	if err := saveCredential(link, cred); err == nil {
		t.Error("state directory that is a link: saved")
	}
	if _, err := os.Stat(filepath.Join(elsewhere, credentialFile)); err == nil {
		t.Error("the credential went to the link's target")
	}

	if os.Geteuid() != 0 {
		t.Skip("giving a directory to another user needs root")
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
