//go:build !unix

package agent

// oAppendOnly: Windows has neither flag (making a link there needs a
// privilege).
const oAppendOnly = 0
