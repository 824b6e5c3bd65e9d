package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// logFormats are the values of serve's --log-format.
var logFormats = []string{"text", "json"}

// firstStart returns, before serve opens its data dir, a function that
// tells after the start where the admin token was written, if this start
// created it: the path, never the token (unless it is the demo's "demo"),
// so that nobody has to guess where it went and no secret lands in a
// terminal's scrollback or a service log. A replica that knows only the
// hash the replicas share (token "") says where the token is.
func firstStart(dataDir string) func(out io.Writer, token string) {
	path := filepath.Join(dataDir, "admin.token")
	_, err := os.Stat(path)
	created := errors.Is(err, os.ErrNotExist) && strings.TrimSpace(os.Getenv("VDIBROKER_ADMIN_TOKEN")) == ""
	return func(out io.Writer, token string) {
		switch {
		case token == "demo":
			fmt.Fprintln(out, "admin token: demo")
		case token == "":
			fmt.Fprintln(out, "the admin token is the one the replicas share through the database: the admin.token of the replica that started first, or VDIBROKER_ADMIN_TOKEN")
		case created:
			if abs, err := filepath.Abs(path); err == nil {
				path = abs
			}
			fmt.Fprintf(out, "created the admin token in %s (%s): use it with --token or VDIBROKER_TOKEN, and to sign in to the console\n", path, secretFileAccess)
		}
	}
}
