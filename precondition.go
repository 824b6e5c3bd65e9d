package vdibroker

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Optimistic concurrency of the objects an admin reads, edits and writes
// back (R-E13): host pools, application groups, applications and scaling
// plans. A GET answers an ETag derived from the object's updateTime,
// which every write moves forward past any time issued before; a PUT,
// PATCH or DELETE with If-Match changes only the object read, a PUT with
// If-None-Match: * writes only where there is none. The store checks it
// in the write's transaction.

// Precondition is what a PUT asks of the object it replaces (R-E13); the
// zero value asks nothing, as a PUT without the headers.
type Precondition struct {
	// Exists: the object must exist (If-Match: * or entity tags).
	Exists bool
	// Absent: the object must not exist (If-None-Match: *).
	Absent bool
	// Versions, when any, are the update times the object may have (the
	// If-Match entity tags, one of which must be its ETag).
	Versions []time.Time
}

// ETag is the strong entity tag of an object last written at updated
// (R-E13): its update time in Unix nanoseconds, quoted.
func ETag(updated time.Time) string {
	return `"` + strconv.FormatInt(updated.UnixNano(), 10) + `"`
}

// ParsePrecondition reads the If-Match and If-None-Match headers of a PUT
// or PATCH (R-E13). If-Match is "*" or a list of entity tags (RFC 9110: compared
// strongly, so a weak tag or one not made by ETag never matches);
// If-None-Match is "*" only (a PUT of an object whose tag it knows has no
// use). Any other form is InvalidArgument naming the header.
func ParsePrecondition(h http.Header) (Precondition, error) {
	var p Precondition
	if v := strings.TrimSpace(strings.Join(h.Values("If-None-Match"), ",")); v != "" {
		if v != "*" {
			return p, FieldError("If-None-Match", `only "*" (create, never replace) is allowed, got %q`, clip(v))
		}
		p.Absent = true
	}
	im := strings.TrimSpace(strings.Join(h.Values("If-Match"), ","))
	if im == "" {
		return p, nil
	}
	p.Exists = true
	if im == "*" {
		return p, nil
	}
	const maxTags = 16
	tags := strings.Split(im, ",")
	if len(tags) > maxTags {
		return p, FieldError("If-Match", "at most %d entity tags, got %d", maxTags, len(tags))
	}
	for _, tag := range tags {
		tag = strings.TrimSpace(tag)
		weak := strings.HasPrefix(tag, "W/")
		opaque := strings.TrimPrefix(tag, "W/")
		if len(opaque) < 2 || opaque[0] != '"' || opaque[len(opaque)-1] != '"' || strings.Contains(opaque[1:len(opaque)-1], `"`) {
			return p, FieldError("If-Match", `"*" or entity tags as a GET's ETag answers them, "..." in double quotes, got %q`, clip(im))
		}
		if weak {
			continue // never matches strongly
		}
		// Strong comparison is of the characters (RFC 9110 8.8.3.2): only
		// ETag's own spelling of a number matches, not "+n" or "0n".
		if ns, err := strconv.ParseInt(opaque[1:len(opaque)-1], 10, 64); err == nil && ETag(time.Unix(0, ns)) == opaque {
			p.Versions = append(p.Versions, time.Unix(0, ns))
		}
	}
	if len(p.Versions) == 0 {
		// No tag this server made: none matches any object.
		p.Versions = []time.Time{{}}
	}
	return p, nil
}

// ParseDeletePrecondition reads the If-Match header of a DELETE as
// ParsePrecondition does (R-E13); If-None-Match, which would delete only
// what does not exist, is InvalidArgument naming it.
func ParseDeletePrecondition(h http.Header) (Precondition, error) {
	if strings.TrimSpace(strings.Join(h.Values("If-None-Match"), ",")) != "" {
		return Precondition{}, FieldError("If-None-Match", "not allowed on a DELETE: send If-Match with the ETag read, or no header")
	}
	return ParsePrecondition(h)
}

// clip bounds a header quoted back in a refusal.
func clip(s string) string {
	if len(s) > 100 {
		return s[:100] + "..."
	}
	return s
}

// Check says whether the precondition holds for the object what (for
// instance `application group "x"`), which exists or not, last written at
// updated: nil, or PreconditionFailed saying why and what to do.
func (p Precondition) Check(what string, exists bool, updated time.Time) error {
	switch {
	case p.Absent && exists:
		return Errorf(EPreconditionFailed, "%s exists already (If-None-Match: *): it was not replaced; change it with an update", what)
	case p.Exists && !exists:
		return Errorf(EPreconditionFailed, "%s does not exist (If-Match): it was deleted since it was read, or never created; nothing was written", what)
	case len(p.Versions) > 0 && !slices.ContainsFunc(p.Versions, updated.Equal):
		return Errorf(EPreconditionFailed, "%s changed since it was read (If-Match does not match its ETag, now %s): nothing was written; read it again and make the change on what it is now",
			what, ETag(updated))
	}
	return nil
}
