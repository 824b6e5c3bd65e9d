package agent

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/vdibroker/vdibroker/internal/winacl"
)

// createSecretTemp creates a new file in dir, named by pattern with its
// last "*" replaced by a random number as os.CreateTemp does, with
// StateFileSDDL from its first byte.
func createSecretTemp(dir, pattern string) (*os.File, error) {
	prefix, suffix := pattern, ""
	if i := strings.LastIndex(pattern, "*"); i >= 0 {
		prefix, suffix = pattern[:i], pattern[i+1:]
	}
	for try := 0; ; try++ {
		var b [4]byte
		rand.Read(b[:]) // never fails
		name := filepath.Join(dir, prefix+strconv.FormatUint(uint64(binary.LittleEndian.Uint32(b[:])), 10)+suffix)
		f, err := winacl.CreateFileSDDL(name, StateFileSDDL)
		if errors.Is(err, os.ErrExist) && try < 100 {
			continue
		}
		return f, err
	}
}

// CheckSecretFile reports why the agent's secret file path (the host
// credential, the registration token file) may be read by others than
// the agent's account, SYSTEM and Administrators, or be given to them by
// its owner (winacl.CheckPrivate), as the broker checks its admin.token
// (R-SEC). The error begins with path and says the icacls command that
// fixes it.
func CheckSecretFile(path string) error { return winacl.CheckPrivateFile(path) }
