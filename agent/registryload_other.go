//go:build !windows

package agent

// systemRegistry is nil: only Windows has a registry.
var systemRegistry RegistryReader
