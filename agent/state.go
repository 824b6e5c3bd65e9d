package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// credentialFile is the name of the host credential in the state directory.
const credentialFile = "credential.json"

// savedCredential is what the agent keeps across restarts.
type savedCredential struct {
	Server       string    `json:"server"`
	HostPool     string    `json:"hostPool"`
	HostName     string    `json:"hostName"`
	Credential   string    `json:"credential"`
	RegisteredAt time.Time `json:"registeredAt"`
}

// loadCredential reads the saved credential; (nil, nil) when there is none.
func loadCredential(dir string) (*savedCredential, error) {
	if dir == "" {
		return nil, nil
	}
	path := filepath.Join(dir, credentialFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read credential: %w", err)
	}
	// On Windows a credential others may read is not used: the agent
	// registers again with its token alone, refused for a registered
	// host's name (an admin resets its registration first, or the file
	// is fixed with the icacls command the error names); the new
	// credential is written private (R-SEC).
	if err := CheckSecretFile(path); err != nil {
		return nil, fmt.Errorf("read credential: %w", err)
	}
	var c savedCredential
	if err := json.Unmarshal(data, &c); err != nil || c.Credential == "" {
		return nil, fmt.Errorf("read credential %s: not a saved credential", filepath.Join(dir, credentialFile))
	}
	return &c, nil
}

// saveCredential writes the credential readable by the agent's user only
// (on Windows, by LocalSystem and Administrators: StateFileSDDL): the
// directory 0700, the file 0600, replaced atomically so a crash leaves
// either the old or the new credential, never half of one.
func saveCredential(dir string, c *savedCredential) error {
	if dir == "" {
		return nil
	}
	if err := secureDir(dir); err != nil {
		return fmt.Errorf("save credential: %w", err)
	}
	data, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	if err := WriteSecretFile(filepath.Join(dir, credentialFile), append(data, '\n')); err != nil {
		return fmt.Errorf("save credential: %w", err)
	}
	return nil
}

// WriteSecretFile replaces the file path, in the state directory, with
// data, atomically (a temporary file beside it, renamed), readable by the
// agent's user only (0600) on Unix, by LocalSystem and Administrators only
// on Windows (StateFileSDDL, given at its creation: the file does not
// rely on the directory's entries).
func WriteSecretFile(path string, data []byte) error {
	f, err := createSecretTemp(filepath.Dir(path), filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // no-op after the rename
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
