package agent

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"unicode/utf16"
)

// The custom load value read from the Windows registry (R-IDX3), as Horizon
// reads it: its load scripts write a value, the agent reads it every sample.
// The parsing is here, without a build tag; registryload_windows.go reads
// the value.

// HorizonCustomLoadValue is where Horizon's RDS load balancing scripts write
// the load value (a REG_DWORD 0..100): `--custom-load-registry horizon`
// names it, and so does the path written out.
const HorizonCustomLoadValue = `HKLM\Software\VMware, Inc.\VMware VDM\Performance Stats\CustomLoadValue`

// RegistryValuePath is a registry value under HKEY_LOCAL_MACHINE: the key's
// path below the root and the value's name.
type RegistryValuePath struct {
	Key   string // e.g. Software\VMware, Inc.\VMware VDM\Performance Stats
	Value string // e.g. CustomLoadValue
}

// String is the path as reg.exe and the docs write it.
func (p RegistryValuePath) String() string { return `HKLM\` + p.Key + `\` + p.Value }

// maxRegistryPath bounds a registry path: Windows limits key names to 255
// characters and values' names to 16,383; a whole path of a few hundred is
// plenty for a flag.
const maxRegistryPath = 1024

// ParseRegistryValuePath reads a --custom-load-registry value: "horizon" for
// HorizonCustomLoadValue, or ROOT\KEY\VALUE with ROOT HKLM or
// HKEY_LOCAL_MACHINE (the agent runs as a service, whose HKEY_CURRENT_USER
// is no user's), the key's path and, after the last backslash, the value's
// name. Key and value names are not case-sensitive.
func ParseRegistryValuePath(s string) (RegistryValuePath, error) {
	if strings.EqualFold(s, "horizon") {
		s = HorizonCustomLoadValue
	}
	if len(s) > maxRegistryPath {
		return RegistryValuePath{}, fmt.Errorf("registry path of %d bytes: at most %d", len(s), maxRegistryPath)
	}
	root, rest, ok := strings.Cut(s, `\`)
	if !ok || !(strings.EqualFold(root, "HKLM") || strings.EqualFold(root, "HKEY_LOCAL_MACHINE")) {
		return RegistryValuePath{}, fmt.Errorf("registry path %q: want HKLM\\KEY\\VALUE (or horizon for %s)", s, HorizonCustomLoadValue)
	}
	i := strings.LastIndex(rest, `\`)
	if i < 0 {
		return RegistryValuePath{}, fmt.Errorf("registry path %q: want HKLM\\KEY\\VALUE, the value's name after the key", s)
	}
	p := RegistryValuePath{Key: rest[:i], Value: rest[i+1:]}
	if p.Value == "" || slicesContainEmpty(strings.Split(p.Key, `\`)) {
		return RegistryValuePath{}, fmt.Errorf("registry path %q: empty key or value name", s)
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return RegistryValuePath{}, fmt.Errorf("registry path %q: control character", s)
		}
	}
	return p, nil
}

func slicesContainEmpty(parts []string) bool {
	for _, p := range parts {
		if p == "" {
			return true
		}
	}
	return false
}

// Registry value types (winnt.h REG_*) the agent names in its reasons.
const (
	regNone     = 0
	regSZ       = 1
	regExpandSZ = 2
	regBinary   = 3
	regDWORD    = 4
	regDWORDBE  = 5
	regLink     = 6
	regMultiSZ  = 7
	regQWORD    = 11
)

var regTypeNames = map[uint32]string{regNone: "REG_NONE", regSZ: "REG_SZ", regExpandSZ: "REG_EXPAND_SZ",
	regBinary: "REG_BINARY", regDWORD: "REG_DWORD", regDWORDBE: "REG_DWORD_BIG_ENDIAN", regLink: "REG_LINK",
	regMultiSZ: "REG_MULTI_SZ", regQWORD: "REG_QWORD"}

func regTypeName(t uint32) string {
	if n, ok := regTypeNames[t]; ok {
		return n
	}
	return fmt.Sprintf("type %d", t)
}

// maxRegistryData bounds the data of a custom load value: a REG_SZ of a
// number and white space needs far less.
const maxRegistryData = 256

// ParseRegistryLoad reads a custom load value's registry data (R-IDX3), the
// type and bytes RegQueryValueEx answers:
//
//   - REG_DWORD (4 bytes, little-endian), what Horizon's scripts write; read
//     as a signed 32-bit number, as PowerShell and reg.exe show it, so a
//     script that wrote -1 has written "no value", not 4294967295;
//   - REG_SZ, UTF-16LE up to its first NUL: an integer as a script would
//     print it (ParseCustomLoad's rules: white space around it allowed).
//
// As for the script's output, 0..100 is the value, above 100 is capped at
// 100 (Horizon does the same), and anything else is no value (nil) with an
// error saying why: a negative number, another type (REG_QWORD,
// REG_EXPAND_SZ, REG_BINARY...), a DWORD of other than 4 bytes, a string
// that is no integer, or more than maxRegistryData bytes.
func ParseRegistryLoad(valueType uint32, data []byte) (*int, error) {
	if len(data) > maxRegistryData {
		return nil, fmt.Errorf("%s of %d bytes, want a REG_DWORD 0..100", regTypeName(valueType), len(data))
	}
	switch valueType {
	case regDWORD:
		if len(data) != 4 {
			return nil, fmt.Errorf("REG_DWORD of %d bytes, want 4", len(data))
		}
		v, err := loadValue(int64(int32(binary.LittleEndian.Uint32(data))))
		if err != nil {
			return nil, fmt.Errorf("REG_DWORD %w", err)
		}
		return v, nil
	case regSZ:
		if len(data)%2 != 0 {
			return nil, fmt.Errorf("REG_SZ of %d bytes is not UTF-16", len(data))
		}
		u := make([]uint16, 0, len(data)/2)
		for i := 0; i < len(data); i += 2 {
			c := binary.LittleEndian.Uint16(data[i:])
			if c == 0 {
				break
			}
			u = append(u, c)
		}
		n, err := parseLoadText(string(utf16.Decode(u)))
		var v *int
		if err == nil {
			v, err = loadValue(n)
		}
		if err != nil {
			return nil, fmt.Errorf("REG_SZ %w", err)
		}
		return v, nil
	}
	return nil, fmt.Errorf("%s, want a REG_DWORD (or REG_SZ) 0..100", regTypeName(valueType))
}

// RegistryReader reads a registry value under HKEY_LOCAL_MACHINE: its type
// and data (at most max bytes, or an error), or an error wrapping
// fs.ErrNotExist when the key or value does not exist.
type RegistryReader func(ctx context.Context, p RegistryValuePath, max int) (valueType uint32, data []byte, err error)

// readRegistryLoad reads and parses the custom load value at p (R-IDX3):
// the value, or no value and the reason.
func readRegistryLoad(ctx context.Context, read RegistryReader, p RegistryValuePath) (*int, error) {
	t, data, err := read(ctx, p, maxRegistryData)
	if err != nil {
		return nil, fmt.Errorf("custom load value %s: %w", p, err)
	}
	v, err := ParseRegistryLoad(t, data)
	if err != nil {
		return nil, fmt.Errorf("custom load value %s: %w", p, err)
	}
	return v, nil
}
