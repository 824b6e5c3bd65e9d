//go:build !linux

package agent

import (
	"fmt"
	"runtime"
)

func newXrdp() (SessionProvider, error) {
	return nil, fmt.Errorf("sessions provider xrdp: %w on %s (Linux only); use file:PATH or none", ErrUnsupported, runtime.GOOS)
}
