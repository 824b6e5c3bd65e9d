package vdibroker

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// TestFoldUserIsEqualFold (R-E5): over every rune, two runes have one key
// exactly when strings.EqualFold says they are one letter, and an ASCII
// letter's key is its lower case (what migration 00030's SQL wrote).
func TestFoldUserIsEqualFold(t *testing.T) {
	byKey := map[string][]rune{}
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if !utf8.ValidRune(r) {
			continue
		}
		k := FoldUser(string(r))
		byKey[k] = append(byKey[k], r)
		// Every rune of r's orbit has r's key.
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			if FoldUser(string(f)) != k {
				t.Fatalf("%U and %U fold together, keys %q and %q", r, f, k, FoldUser(string(f)))
			}
		}
	}
	for k, runes := range byKey {
		for _, r := range runes[1:] {
			if !strings.EqualFold(string(runes[0]), string(r)) {
				t.Fatalf("%U and %U share key %q but are not EqualFold", runes[0], r, k)
			}
		}
	}
	for r := 'A'; r <= 'Z'; r++ {
		if got := FoldUser(string(r)); got != string(r+'a'-'A') {
			t.Errorf("FoldUser(%q) = %q", r, got)
		}
	}
}

func TestFoldUser(t *testing.T) {
	for _, c := range []struct{ a, b string }{
		{"Alice@Contoso.com", "alice@contoso.com"},
		{"ÉRIC", "éric"},
		{"\u212aim", "kim"}, // the Kelvin sign
		{"ſam", "SAM"},      // long s
		{"ΣΟΦΊΑ", "σοφία"},
	} {
		if FoldUser(c.a) != FoldUser(c.b) || !SameUser(c.a, c.b) {
			t.Errorf("%q and %q: keys %q %q", c.a, c.b, FoldUser(c.a), FoldUser(c.b))
		}
	}
	// Not one letter: 'İ' (U+0130) lowers to i but folds with nothing;
	// ß is not ss.
	for _, c := range []struct{ a, b string }{{"İ", "i"}, {"straße", "strasse"}} {
		if FoldUser(c.a) == FoldUser(c.b) {
			t.Errorf("%q and %q share key %q", c.a, c.b, FoldUser(c.a))
		}
	}
}

// FuzzFoldUser: for any two strings, equal keys exactly when EqualFold.
// Seeds: a pair in two cases, a pair that only lowers alike (İ, i).
func FuzzFoldUser(f *testing.F) {
	f.Add("Alice@Contoso.com", "aLICE@contoso.com")
	f.Add("İstanbul", "istanbul")
	f.Add("\xff", "\uFFFD")
	f.Fuzz(func(t *testing.T, a, b string) {
		if (FoldUser(a) == FoldUser(b)) != strings.EqualFold(a, b) {
			t.Errorf("%q %q: keys %q %q, EqualFold %v", a, b, FoldUser(a), FoldUser(b), strings.EqualFold(a, b))
		}
		if FoldUser(a) != FoldUser(strings.ToUpper(a)) && strings.EqualFold(a, strings.ToUpper(a)) {
			t.Errorf("%q: key %q, of its upper case %q", a, FoldUser(a), FoldUser(strings.ToUpper(a)))
		}
	})
}

// TestEditUsers (R-E5): names are added once and removed in any case, the
// list's order kept and a removal of all leaving an empty list, not nil
// (an assignment's users is [] in JSON).
func TestEditUsers(t *testing.T) {
	for _, tc := range []struct {
		name              string
		list, add, remove []string
		want              []string
	}{
		{"add to nothing", nil, []string{"alice"}, nil, []string{"alice"}},
		{"add one there in another case", []string{"Alice"}, []string{"alice"}, nil, []string{"Alice"}},
		{"add twice", []string{"bob"}, []string{"carol", "CAROL"}, nil, []string{"bob", "carol"}},
		{"remove in another case", []string{"Alice", "bob"}, nil, []string{"ALICE"}, []string{"bob"}},
		{"remove the last", []string{"alice"}, nil, []string{"alice"}, []string{}},
		{"remove one not there", []string{"alice"}, nil, []string{"dave"}, []string{"alice"}},
		{"remove and add back", []string{"alice", "bob"}, []string{"alice"}, []string{"alice"}, []string{"bob", "alice"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := EditUsers(tc.list, tc.add, tc.remove)
			if got == nil || strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("EditUsers(%q, %q, %q) = %#v, want %q", tc.list, tc.add, tc.remove, got, tc.want)
			}
		})
	}
}
