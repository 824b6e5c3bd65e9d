//go:build !windows

package agent

import (
	"fmt"
	"runtime"
)

func newWTS(WindowsUserFormat) (SessionProvider, error) {
	return nil, fmt.Errorf("sessions provider wts: %w on %s (Windows only); use file:PATH or none", ErrUnsupported, runtime.GOOS)
}
