//go:build !linux

package agent

import (
	"fmt"
	"runtime"
)

func newLogind() (SessionProvider, error) {
	return nil, fmt.Errorf("sessions provider logind: %w on %s (Linux only); use file:PATH or none", ErrUnsupported, runtime.GOOS)
}

func newUtmp(path string) (SessionProvider, error) {
	return nil, fmt.Errorf("sessions provider utmp: %w on %s (Linux only); use file:PATH or none", ErrUnsupported, runtime.GOOS)
}
