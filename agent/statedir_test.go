package agent

import (
	"regexp"
	"strings"
	"testing"
)

// TestStateDirSDDL: the state directory is Administrators' and only
// LocalSystem and Administrators may use it; nothing comes from the parent
// (%ProgramData%, where every user may create and read). Whether Windows
// reads the string so is TestWindowsStateDir's (wts_windows_test.go).
func TestStateDirSDDL(t *testing.T) {
	const want = "O:BAD:P(A;OICI;FA;;;SY)(A;OICI;FA;;;BA)"
	if StateDirSDDL != want {
		t.Fatalf("StateDirSDDL = %q, want %q", StateDirSDDL, want)
	}
	// The same, as properties a change must keep.
	owner, dacl, ok := strings.Cut(StateDirSDDL, "D:")
	if !ok || owner != "O:BA" {
		t.Errorf("owner part %q, want O:BA", owner)
	}
	flags, aces, _ := strings.Cut(dacl, "(")
	if flags != "P" {
		t.Errorf("DACL flags %q, want P (protected, no inherited ACEs; AI would let them in)", flags)
	}
	ace := regexp.MustCompile(`^A;OICI;FA;;;(SY|BA)$`)
	seen := map[string]bool{}
	for _, a := range strings.Split(strings.TrimSuffix("("+aces, ")"), ")(") {
		a = strings.TrimPrefix(a, "(")
		m := ace.FindStringSubmatch(a)
		if m == nil {
			t.Errorf("ACE %q: want an allow of full access, inherited below, to SY or BA only", a)
			continue
		}
		seen[m[1]] = true
	}
	if !seen["SY"] || !seen["BA"] {
		t.Errorf("accounts %v, want SY and BA", seen)
	}
	if got := buildSDDL("SY", nil); got != "O:SYD:P" {
		t.Errorf("buildSDDL with no ACE = %q: an empty protected DACL denies everyone", got)
	}
}

// TestStateFileSDDL: the agent's secret files are made Administrators'
// with a protected DACL of LocalSystem and Administrators, what
// StateDirSDDL gives its files, without relying on it (R-SEC).
func TestStateFileSDDL(t *testing.T) {
	if want := "O:BAD:P(A;;FA;;;SY)(A;;FA;;;BA)"; StateFileSDDL != want {
		t.Errorf("StateFileSDDL = %q, want %q", StateFileSDDL, want)
	}
}

// TestStateAccessError: on Windows the agent keeps its credential where
// only SYSTEM and Administrators may read it, so it runs as LocalSystem
// (the service) or with Administrators enabled (an elevated console); a
// console User Account Control filtered, or an account that is no
// administrator, is refused at start with the two ways that work, rather
// than registering again at every start (R-SEC).
func TestStateAccessError(t *testing.T) {
	const dir = `C:\ProgramData\vdibroker`
	for _, c := range []struct {
		name   string
		dir    string
		access stateAccess
		want   string // in the error; "" for none
	}{
		{name: "the service, LocalSystem", dir: dir, access: stateAccess{system: true, admins: true}},
		{name: "an elevated console", dir: dir, access: stateAccess{admins: true}},
		{name: "a console UAC filtered", dir: dir, access: stateAccess{filtered: true},
			want: `this console is not elevated (User Account Control runs it without Administrators): run the agent as an administrator from a console opened with "Run as administrator", or install it as a service (vdibroker agent install)`},
		{name: "no administrator", dir: dir, access: stateAccess{},
			want: `this account is not an administrator: run the agent as an administrator`},
		{name: "no state dir: nothing kept", dir: "", access: stateAccess{filtered: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := stateAccessError(c.dir, c.access)
			switch {
			case c.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "--state-dir "+dir+": ")):
				t.Errorf("error %v, want it to begin with the flag and dir and say %q", err, c.want)
			}
		})
	}
}
