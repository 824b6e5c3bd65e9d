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
	data, err := os.ReadFile(filepath.Join(dir, credentialFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read credential: %w", err)
	}
	var c savedCredential
	if err := json.Unmarshal(data, &c); err != nil || c.Credential == "" {
		return nil, fmt.Errorf("read credential %s: not a saved credential", filepath.Join(dir, credentialFile))
	}
	return &c, nil
}

// saveCredential writes the credential readable by the agent's user only
// (on Windows, by LocalSystem and Administrators: StateDirSDDL): the
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
	f, err := os.CreateTemp(dir, credentialFile+".*.tmp") // created 0600
	if err != nil {
		return fmt.Errorf("save credential: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // no-op after the rename
	if _, err := f.Write(append(data, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("save credential: %w", err)
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return fmt.Errorf("save credential: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("save credential: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("save credential: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, credentialFile)); err != nil {
		return fmt.Errorf("save credential: %w", err)
	}
	return nil
}
