//go:build unix

package agent

import "syscall"

// oAppendOnly are the flags SendMessage of the file provider adds: no link
// followed, no wait for a FIFO's reader.
const oAppendOnly = syscall.O_NOFOLLOW | syscall.O_NONBLOCK
