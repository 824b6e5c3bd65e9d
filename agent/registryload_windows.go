//go:build windows

package agent

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"golang.org/x/sys/windows/registry"
)

// systemRegistry reads this machine's registry.
var systemRegistry RegistryReader = readRegistry

// readRegistry reads a value under HKEY_LOCAL_MACHINE in the 64-bit view of
// the registry (a 32-bit script's HKLM\Software writes land in
// WOW6432Node, which is not read).
func readRegistry(ctx context.Context, p RegistryValuePath, max int) (uint32, []byte, error) {
	k, err := registry.OpenKey(registry.LOCAL_MACHINE, p.Key, registry.QUERY_VALUE|registry.WOW64_64KEY)
	if errors.Is(err, registry.ErrNotExist) {
		return 0, nil, fmt.Errorf("the key does not exist: %w", fs.ErrNotExist)
	}
	if err != nil {
		return 0, nil, fmt.Errorf("open key: %w", err)
	}
	defer k.Close()
	buf := make([]byte, max)
	n, t, err := k.GetValue(p.Value, buf)
	switch {
	case errors.Is(err, registry.ErrNotExist):
		return 0, nil, fmt.Errorf("the value does not exist: %w", fs.ErrNotExist)
	case errors.Is(err, registry.ErrShortBuffer):
		return 0, nil, fmt.Errorf("%s of %d bytes, more than %d", regTypeName(t), n, max)
	case err != nil:
		return 0, nil, fmt.Errorf("read value: %w", err)
	}
	return t, buf[:n], nil
}
