package main

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"unicode/utf8"
)

// tokenFile is a bearer token from a file that reload reads again
// (SIGHUP), or given as it is (no file): the tokens the gateway sends
// (--keys-token-file, --broker-token-file) and the one serve's and the
// gateway's /metrics require (--metrics-token-file). Replacing one so
// takes no restart, which for a gateway would drop every tunnel.
type tokenFile struct {
	flag, path string
	use        tokenUse
	// minLen is the fewest characters a token from the file has (0:
	// any but none).
	minLen int
	v      atomic.Pointer[string]
}

// tokenUse says what a token file's token is for, which decides the
// characters it may have.
type tokenUse int

const (
	// tokenSent is a bearer token the gateway sends: one word of
	// printable ASCII, as a token the broker issues is.
	tokenSent tokenUse = iota
	// tokenChecked is one requireBearer compares a caller's
	// Authorization header with (--metrics-token-file): anything a
	// client can send in a header, spaces and letters of any script
	// included, as serve took before the file was read again on SIGHUP;
	// only a line break or another control character, which no client
	// can send, makes it no token.
	tokenChecked
)

// notInToken reports whether r is a character no token of use has.
func (use tokenUse) notInToken(r rune) bool {
	if use == tokenChecked {
		return r < ' ' && r != '\t' || r == 0x7f
	}
	return r <= ' ' || r >= 0x7f
}

// newTokenFile reads path (flag's file), or holds token without one; a
// token the file holds must have at least minLen characters (bytes), and
// none that no token of use has.
func newTokenFile(flag, path, token string, use tokenUse, minLen int) (*tokenFile, error) {
	f := &tokenFile{flag: flag, path: path, use: use, minLen: minLen}
	f.v.Store(&token)
	return f, f.reload()
}

func (f *tokenFile) get() string { return *f.v.Load() }

// reload reads the file again; a file that cannot be read, holds no
// token, one shorter than minLen, or what no bearer token is (two lines,
// as a federation secret file may hold; a control character inside, or
// for a token the gateway sends a space) keeps the token in force: such a value would make every
// request the gateway sends fail (Go refuses a header value with a line
// break) or be refused, so no tunnel would open and none would be
// checked or reported closed; and no scraper would send it.
func (f *tokenFile) reload() error {
	if f.path == "" {
		return nil
	}
	b, err := os.ReadFile(f.path)
	if err != nil {
		return usageError{fmt.Errorf("%s: %w", f.flag, err)}
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return usageError{fmt.Errorf("%s: %s holds no token", f.flag, f.path)}
	}
	if i := strings.IndexFunc(tok, f.use.notInToken); i >= 0 {
		r, _ := utf8.DecodeRuneInString(tok[i:])
		return usageError{fmt.Errorf("%s: %s holds more than one token, or a character no token has (%q at byte %d): want one token on one line", f.flag, f.path, r, i)}
	}
	if len(tok) < f.minLen {
		return usageError{fmt.Errorf("%s: %s holds a token of %d characters: want at least %d", f.flag, f.path, len(tok), f.minLen)}
	}
	f.v.Store(&tok)
	return nil
}

// hup is reload on SIGHUP, logged: at warn, as the other SIGHUP lines,
// the file read (the operator waits for that line before deleting the
// old token) and whether the token changed; at error why a file was not
// read and the token in force kept. Neither line holds a token. No file:
// nothing to read, nothing logged.
func (f *tokenFile) hup(log *slog.Logger) {
	if f.path == "" {
		return
	}
	old := f.get()
	if err := f.reload(); err != nil {
		log.Error("SIGHUP: token file not read; keeping the token in force", "flag", f.flag, "err", err)
		return
	}
	log.Warn("SIGHUP: token file read", "flag", f.flag, "file", f.path, "changed", f.get() != old)
}
