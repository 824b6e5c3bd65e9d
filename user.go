package vdibroker

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// User names and group names are compared without regard to case (R-E5):
// Active Directory and Entra ID compare UPNs and group names so, and a
// user who signs in as Alice@Contoso.com one day and alice@contoso.com the
// next is one user with one session per pool (R-C6). A name is stored as
// it was first given; FoldUser is the key it is compared by, computed here
// and stored beside it, so SQLite (whose lower() folds ASCII only) and
// PostgreSQL (whose lower() depends on the database's locale) compare
// exactly as the Go code does.
//
// The fold is simple Unicode case folding, the equivalence of
// strings.EqualFold: one rune for one rune, so "K" (the Kelvin sign), "K"
// and "k" are one letter, and "ß" stays apart from "ss" (full case folding,
// golang.org/x/text/cases.Fold, would join them; Windows compares names
// letter by letter, as this does).

// FoldUser returns the key user names (and group names) are compared by:
// FoldUser(a) == FoldUser(b) exactly when strings.EqualFold(a, b). Each
// letter becomes one letter of those it folds with: the lower-case letter
// for ASCII (so an ASCII name's key is its lower case, as SQL's lower()
// writes it), else the smallest.
func FoldUser(s string) string {
	ascii := true
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii {
		return strings.ToLower(s)
	}
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		b.WriteRune(foldRune(r))
	}
	return b.String()
}

// foldRune maps r to the representative of its simple case folding orbit
// (unicode.SimpleFold): always a member of the orbit, so two orbits never
// share one. unicode.ToLower alone would not do: 'İ' (U+0130) folds with
// nothing, yet its lower case is 'i'.
func foldRune(r rune) rune {
	least := r
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		least = min(least, f)
	}
	if least < utf8.RuneSelf {
		return unicode.ToLower(least) // an ASCII orbit's lower-case letter
	}
	return least
}

// SameUser reports whether a and b name the same user (or group): equal
// under simple case folding (R-E5).
func SameUser(a, b string) bool { return strings.EqualFold(a, b) }

// ContainsUser reports whether list names user, case-insensitively (R-E5).
func ContainsUser(list []string, user string) bool {
	for _, u := range list {
		if SameUser(u, user) {
			return true
		}
	}
	return false
}

// EditUsers is list with add appended (those not in it in any case) and
// remove taken out (in any case, R-E5): an assignment's users or groups
// as the CLI's --add-users and the console's Assign and Unassign change
// them.
func EditUsers(list, add, remove []string) []string {
	out := []string{}
	for _, n := range list {
		if !ContainsUser(remove, n) {
			out = append(out, n)
		}
	}
	for _, n := range add {
		if !ContainsUser(out, n) {
			out = append(out, n)
		}
	}
	return out
}
