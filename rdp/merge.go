package rdp

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// Per-pool properties and RemoteApps (R-E7, R-E8): what a pool or an
// application connect adds to the server's properties before File writes
// them.

// ParseCustomProperties reads a pool's customRdpProperty (AVD's name,
// R-E8): properties "name:type:value" separated by ";" (as AVD writes
// them) or line breaks, each checked as ParseProperties checks a line.
// A ";" inside a string value is kept when what follows it is not a
// property ("drivestoredirect:s:C:;D:" redirects C: and D:). Empty
// pieces are skipped. The error names the property.
func ParseCustomProperties(text string) ([]Property, error) {
	if !utf8.ValidString(text) {
		return nil, fmt.Errorf("not UTF-8 text")
	}
	var pieces []string
	for _, line := range strings.Split(text, "\n") {
		for _, piece := range strings.Split(strings.TrimRight(line, "\r"), ";") {
			if strings.TrimSpace(piece) == "" {
				continue
			}
			if !looksLikeProperty(piece) && len(pieces) > 0 && propertyType(pieces[len(pieces)-1]) == 's' {
				pieces[len(pieces)-1] += ";" + piece
				continue
			}
			pieces = append(pieces, piece)
		}
	}
	var list []Property
	for _, piece := range pieces {
		p, err := parseRDPLine(piece)
		if err != nil {
			return nil, err
		}
		if slices.ContainsFunc(list, func(q Property) bool { return q.Name == p.Name }) {
			return nil, fmt.Errorf("property %q: set twice", p.Name)
		}
		list = append(list, p)
	}
	return list, nil
}

// looksLikeProperty reports whether piece has the form name:t:value with
// a one-letter type, as every .rdp property has.
func looksLikeProperty(piece string) bool {
	return propertyType(piece) != 0
}

// propertyType is the type letter of a name:t:value piece, or 0.
func propertyType(piece string) byte {
	name, rest, ok1 := strings.Cut(piece, ":")
	typ, _, ok2 := strings.Cut(rest, ":")
	if !ok1 || !ok2 || strings.TrimSpace(name) == "" || len(typ) != 1 || !strings.Contains("isb", typ) {
		return 0
	}
	return typ[0]
}

// Merge returns base with over's properties over it: each of over
// replaces base's property of its name, in base's place; the others are
// added after, in over's order.
func Merge(base, over []Property) []Property {
	out := slices.Clone(base)
	for _, p := range over {
		if i := slices.IndexFunc(out, func(q Property) bool { return q.Name == p.Name }); i >= 0 {
			out[i] = p
		} else {
			out = append(out, p)
		}
	}
	return out
}

// WithRemoteApp returns props made to open an application as a RemoteApp
// (R-E7): every remoteapplication* property of props goes (a server's
// or a pool's, meant for its desktops), and the application's are added:
// remoteapplicationmode:i:1, remoteapplicationprogram:s:||program (the
// application's alias, which the session host resolves), its name as the
// client shows it, and its command line when it has one. program, name
// and cmdline were validated (no control characters), so they cannot
// inject lines.
func WithRemoteApp(props []Property, program, name, cmdline string) []Property {
	out := slices.DeleteFunc(slices.Clone(props), func(p Property) bool {
		return strings.HasPrefix(p.Name, "remoteapplication")
	})
	out = append(out,
		Property{"remoteapplicationmode", 'i', "1"},
		Property{"remoteapplicationprogram", 's', "||" + program},
		Property{"remoteapplicationname", 's', name})
	if cmdline != "" {
		out = append(out, Property{"remoteapplicationcmdline", 's', cmdline})
	}
	return out
}
