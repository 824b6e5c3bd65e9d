//go:build unix

package main

import (
	"os"
	"syscall"
)

// chownLike gives the file path the owner and group of fi (a file it
// replaces): a JWKS file of group gateway, mode 0640, that keygen run
// as root replaced by root's own would no longer be read by the gateway.
func chownLike(path string, fi os.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	return os.Chown(path, int(st.Uid), int(st.Gid))
}
