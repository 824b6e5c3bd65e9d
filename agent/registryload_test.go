package agent

import (
	"context"
	"encoding/binary"
	"fmt"
	"io/fs"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf16"
)

func regDWORDData(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }

// regSZData is a REG_SZ's data as RegSetValueEx stores it: UTF-16LE with
// its NUL.
func regSZData(s string) []byte {
	var b []byte
	for _, c := range utf16.Encode([]rune(s)) {
		b = binary.LittleEndian.AppendUint16(b, c)
	}
	return append(b, 0, 0)
}

func TestParseRegistryValuePath(t *testing.T) {
	horizon := RegistryValuePath{Key: `Software\VMware, Inc.\VMware VDM\Performance Stats`, Value: "CustomLoadValue"}
	tests := []struct {
		in   string
		want RegistryValuePath // zero: refused
	}{
		{"horizon", horizon},
		{"Horizon", horizon},
		{HorizonCustomLoadValue, horizon}, // Horizon's path as it is
		{`HKEY_LOCAL_MACHINE\Software\VMware, Inc.\VMware VDM\Performance Stats\CustomLoadValue`, horizon},
		{`hklm\SOFTWARE\Contoso\Load\Value`, RegistryValuePath{Key: `SOFTWARE\Contoso\Load`, Value: "Value"}},
		{`HKLM\Load\Value`, RegistryValuePath{Key: "Load", Value: "Value"}},
		{"", RegistryValuePath{}},
		{`HKCU\Software\Contoso\Load`, RegistryValuePath{}}, // a service has no user
		{`HKLM\Value`, RegistryValuePath{}},                 // no key
		{`HKLM\Software\Contoso\`, RegistryValuePath{}},     // no value name
		{`HKLM\Software\\Contoso\Load`, RegistryValuePath{}},
		{`HKLM\\Load`, RegistryValuePath{}},
		{`HKLM\Software\Con` + "\n" + `toso\Load`, RegistryValuePath{}},
		{`HKLM\` + strings.Repeat("k", maxRegistryPath) + `\v`, RegistryValuePath{}},
		{`Software\Contoso\Load`, RegistryValuePath{}}, // no root
	}
	for _, tt := range tests {
		got, err := ParseRegistryValuePath(tt.in)
		if (tt.want == RegistryValuePath{}) {
			if err == nil {
				t.Errorf("ParseRegistryValuePath(%q) = %+v, want an error", tt.in, got)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseRegistryValuePath(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
		}
	}
	if got := horizon.String(); got != HorizonCustomLoadValue {
		t.Errorf("String() = %q, want Horizon's path", got)
	}
}

// TestParseRegistryLoad covers R-IDX3's rules for the registry value.
func TestParseRegistryLoad(t *testing.T) {
	tests := []struct {
		name    string
		typ     uint32
		data    []byte
		want    *int
		because string // part of the reason when there is no value
	}{
		{"dword", regDWORD, regDWORDData(42), intp(42), ""},
		{"dword 0", regDWORD, regDWORDData(0), intp(0), ""},
		{"dword 100", regDWORD, regDWORDData(100), intp(100), ""},
		{"dword over 100 capped", regDWORD, regDWORDData(250), intp(100), ""},
		{"dword the largest signed", regDWORD, regDWORDData(0x7FFFFFFF), intp(100), ""},
		// -1 as a script writes it: 0xFFFFFFFF, negative, not 4294967295.
		{"dword -1", regDWORD, regDWORDData(0xFFFFFFFF), nil, "REG_DWORD -1"},
		{"dword of 3 bytes", regDWORD, []byte{42, 0, 0}, nil, "REG_DWORD of 3 bytes"},
		{"dword of 8 bytes", regDWORD, make([]byte, 8), nil, "want 4"},
		{"sz", regSZ, regSZData("37"), intp(37), ""},
		{"sz with white space", regSZ, regSZData(" 7 \r\n"), intp(7), ""},
		{"sz without its NUL", regSZ, regSZData("37")[:4], intp(37), ""},
		{"sz over 100 capped", regSZ, regSZData("250"), intp(100), ""},
		{"sz stops at its NUL", regSZ, append(regSZData("12"), regSZData("99")...), intp(12), ""},
		{"sz negative", regSZ, regSZData("-3"), nil, `REG_SZ -3`},
		{"sz word", regSZ, regSZData("lots"), nil, `REG_SZ "lots"`},
		{"sz fraction", regSZ, regSZData("4.5"), nil, `"4.5"`},
		{"sz empty", regSZ, regSZData(""), nil, `REG_SZ ""`},
		{"sz odd bytes", regSZ, []byte{'4', 0, '2'}, nil, "not UTF-16"},
		{"sz lone surrogate", regSZ, []byte{0x00, 0xD8, '1', 0}, nil, "want an integer"},
		{"qword", regQWORD, make([]byte, 8), nil, "REG_QWORD, want a REG_DWORD"},
		{"expand sz", regExpandSZ, regSZData("42"), nil, "REG_EXPAND_SZ"},
		{"binary", regBinary, []byte{42}, nil, "REG_BINARY"},
		{"multi sz", regMultiSZ, regSZData("42"), nil, "REG_MULTI_SZ"},
		{"big-endian dword", regDWORDBE, []byte{0, 0, 0, 42}, nil, "REG_DWORD_BIG_ENDIAN"},
		{"unknown type", 99, regDWORDData(1), nil, "type 99"},
		{"too long", regSZ, regSZData(strings.Repeat(" ", 200) + "5"), nil, "bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseRegistryLoad(tt.typ, tt.data)
			if tt.want != nil {
				if err != nil || got == nil || *got != *tt.want {
					t.Fatalf("= %v, %v; want %d", got, err, *tt.want)
				}
				return
			}
			if got != nil || err == nil || !strings.Contains(err.Error(), tt.because) {
				t.Fatalf("= %v, %v; want no value because %q", got, err, tt.because)
			}
		})
	}
}

// fakeRegistry is a RegistryReader over a map, safe for the sampler.
type fakeRegistry struct {
	mu     sync.Mutex
	values map[RegistryValuePath]fakeRegValue
	reads  int
}

type fakeRegValue struct {
	typ  uint32
	data []byte
}

func (r *fakeRegistry) set(p RegistryValuePath, typ uint32, data []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.values == nil {
		r.values = map[RegistryValuePath]fakeRegValue{}
	}
	r.values[p] = fakeRegValue{typ, data}
}

func (r *fakeRegistry) read(ctx context.Context, p RegistryValuePath, max int) (uint32, []byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reads++
	v, ok := r.values[p]
	if !ok {
		return 0, nil, fmt.Errorf("the value does not exist: %w", fs.ErrNotExist)
	}
	if len(v.data) > max {
		return 0, nil, fmt.Errorf("%d bytes, more than %d", len(v.data), max)
	}
	return v.typ, v.data, nil
}

// TestCustomLoadFromRegistry: the agent reads the value every sample and
// reports it, or no value and the reason as a health error, like the
// script's (R-IDX3).
func TestCustomLoadFromRegistry(t *testing.T) {
	horizon, _ := ParseRegistryValuePath("horizon")
	reg := &fakeRegistry{}
	a := newTestAgent(t, Config{Server: "http://127.0.0.1:1", CustomLoadRegistry: HorizonCustomLoadValue, ReadRegistry: reg.read})
	sample := func() (*int, string) {
		a.sample(t.Context())
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.metrics.CustomLoadValue, a.customErr
	}
	steps := []struct {
		name    string
		set     func()
		want    *int
		because string
	}{
		{"missing", func() {}, nil, `custom load value HKLM\Software\VMware, Inc.\VMware VDM\Performance Stats\CustomLoadValue: the value does not exist`},
		{"dword", func() { reg.set(horizon, regDWORD, regDWORDData(42)) }, intp(42), ""},
		{"sz over 100", func() { reg.set(horizon, regSZ, regSZData("250")) }, intp(100), ""},
		{"garbage", func() { reg.set(horizon, regSZ, regSZData("lots")) }, nil, `REG_SZ "lots", want an integer 0..100`},
		{"qword", func() { reg.set(horizon, regQWORD, make([]byte, 8)) }, nil, "REG_QWORD"},
		{"back", func() { reg.set(horizon, regDWORD, regDWORDData(17)) }, intp(17), ""},
	}
	for _, st := range steps {
		st.set()
		got, why := sample()
		if (got == nil) != (st.want == nil) || (got != nil && *got != *st.want) {
			t.Fatalf("%s: value %v, want %v", st.name, got, st.want)
		}
		if (st.because == "") != (why == "") || !strings.Contains(why, st.because) {
			t.Fatalf("%s: health %q, want %q", st.name, why, st.because)
		}
	}
}

// TestCustomLoadScriptWritesRegistry: with a script and a registry value,
// the script runs first and the agent reads the value it wrote, as Horizon
// does; a failing script is a health error beside the value, and after a
// timeout the value it left is read, stale, as Horizon reads it.
func TestCustomLoadScriptWritesRegistry(t *testing.T) {
	p := RegistryValuePath{Key: `Software\Contoso`, Value: "Load"}
	reg := &fakeRegistry{}
	a := newTestAgent(t, Config{Server: "http://127.0.0.1:1", CustomLoadRegistry: p.String(), ReadRegistry: reg.read,
		CustomScript: writeScript(t, "echo 99"), CustomScriptTimeout: 20 * time.Second})
	steps := []struct {
		name, script string
		timeout      time.Duration
		value        uint32
		because      string
	}{
		// The script's output is not the value: the registry's is.
		{"script writes", "echo 99", 20 * time.Second, 30, ""},
		{"script fails", "echo broken >&2; exit 2", 20 * time.Second, 31, "broken"},
		{"script times out", "sleep 30", 200 * time.Millisecond, 55, "timed out"},
	}
	for _, st := range steps {
		a.cfg.CustomScript, a.cfg.CustomScriptTimeout = writeScript(t, st.script), st.timeout
		reg.set(p, regDWORD, regDWORDData(st.value))
		a.sample(t.Context())
		v, why := a.metrics.CustomLoadValue, a.customErr
		if v == nil || *v != int(st.value) || (st.because == "") != (why == "") || !strings.Contains(why, st.because) {
			t.Fatalf("%s: value %v, health %q; want %d and %q", st.name, v, why, st.value, st.because)
		}
	}
}

func TestNewCustomLoadRegistry(t *testing.T) {
	if _, err := New(Config{Server: "http://b:1", HostName: "host-01", Address: "h:3389", RegistrationToken: "t",
		CustomLoadRegistry: `HKCU\x\y`, ReadRegistry: (&fakeRegistry{}).read}); err == nil || !strings.Contains(err.Error(), "customLoadRegistry") {
		t.Errorf("New with an HKCU path = %v, want a customLoadRegistry error", err)
	}
	if systemRegistry == nil {
		// Not Windows: no registry to read.
		_, err := New(Config{Server: "http://b:1", HostName: "host-01", Address: "h:3389", RegistrationToken: "t", CustomLoadRegistry: "horizon"})
		if err == nil || !strings.Contains(err.Error(), "Windows only") {
			t.Errorf("New with a registry value off Windows = %v, want Windows only", err)
		}
	}
}
