package agent

import (
	"errors"
	"strings"
	"testing"
)

// The registry value is written by whatever script the host runs, and the
// path comes from a flag: neither may crash the agent, and a value must stay
// inside R-IDX3's range.

func FuzzParseRegistryLoad(f *testing.F) {
	for _, seed := range []struct {
		typ  uint32
		data []byte
	}{
		{regDWORD, regDWORDData(42)},         // what Horizon's scripts write
		{regDWORD, regDWORDData(0xFFFFFFFF)}, // -1: no value
		{regDWORD, regDWORDData(1000)},       // capped
		{regDWORD, []byte{1, 2, 3}},          // short
		{regSZ, regSZData(" 64 ")},           // a string, white space around
		{regSZ, regSZData("+7")},             // explicit sign
		{regSZ, []byte{0x00, 0xD8, 0x00, 0xDC, '5', 0}},
		{regSZ, []byte{'4'}},        // odd length
		{regQWORD, make([]byte, 8)}, // another type
		{regExpandSZ, regSZData("%LOAD%")},
	} {
		f.Add(seed.typ, seed.data)
	}
	f.Fuzz(func(t *testing.T, typ uint32, data []byte) {
		v, err := ParseRegistryLoad(typ, data)
		if (v == nil) == (err == nil) {
			t.Fatalf("ParseRegistryLoad(%d, %x) = %v, %v: want a value or a reason", typ, data, v, err)
		}
		if v != nil && (*v < 0 || *v > 100) {
			t.Fatalf("ParseRegistryLoad(%d, %x) = %d, outside 0..100", typ, data, *v)
		}
		if v != nil && typ != regDWORD && typ != regSZ {
			t.Fatalf("a value from type %d", typ)
		}
		if err != nil && len(err.Error()) > 200 {
			t.Fatalf("reason of %d bytes: the health error must stay short", len(err.Error()))
		}
	})
}

func FuzzParseRegistryValuePath(f *testing.F) {
	for _, seed := range []string{"horizon", HorizonCustomLoadValue, `HKEY_LOCAL_MACHINE\a\b`, `HKLM\\b`, `HKCU\a\b`, `HKLM\a\`, ""} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParseRegistryValuePath(s)
		if err != nil {
			return
		}
		if p.Value == "" || p.Key == "" || strings.Contains(p.Value, `\`) || strings.HasPrefix(p.Key, `\`) || strings.HasSuffix(p.Key, `\`) {
			t.Fatalf("ParseRegistryValuePath(%q) = %+v", s, p)
		}
		if q, err := ParseRegistryValuePath(p.String()); err != nil || q != p {
			t.Fatalf("%q reads back as %+v, %v", p.String(), q, err)
		}
	})
}

func FuzzParseWTSSessionID(f *testing.F) {
	for _, seed := range []string{"wts-2-134405857310000000", "wts-0-0", "wts-4294967295-9223372036854775807", "wts--1", "xrdp-10-1", ""} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, id string) {
		sid, logon, err := parseWTSSessionID(id)
		if err != nil {
			if !errors.Is(err, ErrNoSession) {
				t.Fatalf("parseWTSSessionID(%q) = %v, want ErrNoSession", id, err)
			}
			return
		}
		// Only ids wtsSessionID makes are read.
		if again := wtsSessionID(WTSSession{ID: sid, LogonTime: logon}); again != id {
			t.Fatalf("parseWTSSessionID(%q) = %d, %d, written back as %q", id, sid, logon, again)
		}
	})
}
