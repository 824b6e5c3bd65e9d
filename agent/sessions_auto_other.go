//go:build !linux && !windows

package agent

import (
	"fmt"
	"runtime"
)

func autoProvider() (SessionProvider, error) {
	return nil, fmt.Errorf("sessions provider auto: no session source is %w on %s yet; use file:PATH or none", ErrUnsupported, runtime.GOOS)
}
