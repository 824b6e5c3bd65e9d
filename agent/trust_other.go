//go:build !unix && !windows

package agent

// fileTrusted checks nothing where the agent knows no owners.
func fileTrusted(path string) error { return nil }
