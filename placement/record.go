package placement

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
)

// The stored form of a decision record (R-C7).
//
// Every durable connect writes its record in the same transaction as the
// session, so the record's size is written once per connect to the
// write-ahead log and once more by the checkpoint: as JSON, a record of
// ExplainLimit candidates is about 3.3 KB, most of a database page per
// connect, and encoding it took encoding/json about 12 µs. AppendRecord
// writes the same fields in a compact binary form (about a sixth of the
// size, in about a microsecond); DecodeRecord reads it, and reads the
// JSON of records stored before too. The API answers JSON (RecordJSON):
// the form is the store's business only.
//
// The form: recordVersion, then each field of Explain in the order of
// appendRecord, strings as a length (uvarint) and bytes, integers as
// varints, booleans as one byte, a time as Unix nanoseconds (varint) in
// UTC, a slice as its length plus one (0 for nil) and its elements, a map
// as its length and its entries by key.

// recordVersion is the first byte of a record in the compact form; a JSON
// record starts with '{'.
const recordVersion = 0x01

// AppendRecord appends e's compact stored form to dst.
func AppendRecord(dst []byte, e *Explain) []byte {
	dst = append(dst, recordVersion)
	dst = appendString(dst, e.Pool)
	dst = appendString(dst, e.User)
	dst = appendString(dst, e.Algorithm)
	dst = appendTime(dst, e.Time)
	dst = appendBool(dst, e.Reconnect)
	dst = appendLen(dst, len(e.Candidates), e.Candidates == nil)
	for _, c := range e.Candidates {
		dst = appendString(dst, c.Host)
		dst = binary.AppendVarint(dst, int64(c.Sessions))
		dst = binary.AppendVarint(dst, int64(c.Connecting))
		dst = binary.AppendVarint(dst, int64(c.LoadIndex))
		dst = binary.AppendVarint(dst, int64(c.Bucket))
	}
	dst = binary.AppendVarint(dst, int64(e.CandidateCount))
	dst = appendLen(dst, len(e.Excluded), e.Excluded == nil)
	for _, x := range e.Excluded {
		dst = appendString(dst, x.Host)
		dst = appendString(dst, x.Reason)
		dst = appendString(dst, x.Detail)
	}
	dst = appendLen(dst, len(e.ExcludedCounts), e.ExcludedCounts == nil)
	if len(e.ExcludedCounts) > 0 {
		reasons := make([]string, 0, len(e.ExcludedCounts))
		for r := range e.ExcludedCounts {
			reasons = append(reasons, r)
		}
		slices.Sort(reasons)
		for _, r := range reasons {
			dst = appendString(dst, r)
			dst = binary.AppendVarint(dst, int64(e.ExcludedCounts[r]))
		}
	}
	dst = appendString(dst, e.Chosen)
	dst = binary.AppendVarint(dst, int64(e.Bucket))
	dst = binary.AppendVarint(dst, int64(e.Rank))
	dst = appendBool(dst, e.Draw != nil)
	if e.Draw != nil {
		dst = binary.AppendVarint(dst, int64(e.Draw.Of))
		dst = binary.AppendVarint(dst, int64(e.Draw.Value))
	}
	dst = binary.AppendVarint(dst, int64(e.RaisedThreshold))
	dst = appendString(dst, e.RoundRobinAfter)
	dst = appendString(dst, e.NoCapacityReason)
	dst = appendString(dst, e.Note)
	dst = appendBool(dst, e.OutageMode)
	dst = appendBool(dst, e.StartedOnConnect)
	dst = appendBool(dst, e.Gateway != nil)
	if e.Gateway != nil {
		dst = appendString(dst, e.Gateway.Name)
		dst = appendTime(dst, e.Gateway.Time)
	}
	return dst
}

// DecodeRecord reads a stored record: the compact form of AppendRecord, or
// JSON (records stored before it).
func DecodeRecord(b []byte) (Explain, error) {
	var e Explain
	if len(b) > 0 && b[0] == '{' {
		err := json.Unmarshal(b, &e)
		return e, err
	}
	if len(b) == 0 || b[0] != recordVersion {
		return e, errors.New("decision record: neither JSON nor a known stored form")
	}
	r := recordReader{b: b[1:]}
	e.Pool, e.User, e.Algorithm = r.string(), r.string(), r.string()
	e.Time = r.time()
	e.Reconnect = r.bool()
	if n, isNil := r.len(); !isNil {
		e.Candidates = make([]Candidate, n)
		for i := range e.Candidates {
			e.Candidates[i] = Candidate{Host: r.string(), Sessions: r.int(), Connecting: r.int(), LoadIndex: r.int(), Bucket: r.int()}
		}
	}
	e.CandidateCount = r.int()
	if n, isNil := r.len(); !isNil {
		e.Excluded = make([]Exclusion, n)
		for i := range e.Excluded {
			e.Excluded[i] = Exclusion{Host: r.string(), Reason: r.string(), Detail: r.string()}
		}
	}
	if n, isNil := r.len(); !isNil {
		e.ExcludedCounts = make(map[string]int, n)
		for range n {
			k := r.string()
			e.ExcludedCounts[k] = r.int()
		}
	}
	e.Chosen = r.string()
	e.Bucket, e.Rank = r.int(), r.int()
	if r.bool() {
		e.Draw = &Draw{Of: r.int(), Value: r.int()}
	}
	e.RaisedThreshold = r.int()
	e.RoundRobinAfter, e.NoCapacityReason, e.Note = r.string(), r.string(), r.string()
	e.OutageMode, e.StartedOnConnect = r.bool(), r.bool()
	if r.bool() {
		e.Gateway = &GatewayReach{Name: r.string(), Time: r.time()}
	}
	if r.err == nil && len(r.b) > 0 {
		r.err = fmt.Errorf("%d bytes after the last field", len(r.b))
	}
	if r.err != nil {
		return Explain{}, fmt.Errorf("decision record: %w", r.err)
	}
	return e, nil
}

// RecordJSON returns a stored record as the API answers it: JSON, with
// gateway (when not nil) as the gateway the user reached the host
// through (R-GW2). A JSON record without a gateway is returned as stored.
func RecordJSON(stored []byte, gateway *GatewayReach) ([]byte, error) {
	if gateway == nil && len(stored) > 0 && stored[0] == '{' {
		return stored, nil
	}
	e, err := DecodeRecord(stored)
	if err != nil {
		return nil, err
	}
	if gateway != nil {
		e.Gateway = gateway
	}
	return json.Marshal(&e)
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func appendBool(dst []byte, b bool) []byte {
	if b {
		return append(dst, 1)
	}
	return append(dst, 0)
}

// appendTime keeps the instant in UTC, as the JSON form shows it: the
// zero time stays the zero time.
func appendTime(dst []byte, t time.Time) []byte {
	if t.IsZero() {
		return appendBool(dst, false)
	}
	dst = appendBool(dst, true)
	dst = binary.AppendVarint(dst, t.Unix())
	return binary.AppendUvarint(dst, uint64(t.Nanosecond()))
}

// appendLen writes a slice's or map's length plus one, 0 for nil.
func appendLen(dst []byte, n int, isNil bool) []byte {
	if isNil {
		return binary.AppendUvarint(dst, 0)
	}
	return binary.AppendUvarint(dst, uint64(n)+1)
}

// recordReader reads the compact form; the first error sticks and every
// later read returns a zero value.
type recordReader struct {
	b   []byte
	err error
}

// fits reports whether n more bytes are left (every element of a slice or
// map takes at least one), so no length read from a record allocates
// more than the record's size.
func (r *recordReader) fits(n uint64) bool {
	if r.err == nil && n > uint64(len(r.b)) {
		r.err = errors.New("a length past the record's end")
	}
	return r.err == nil
}

func (r *recordReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errors.New("truncated or overlong number")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *recordReader) int() int {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = errors.New("truncated or overlong number")
		return 0
	}
	r.b = r.b[n:]
	return int(v)
}

func (r *recordReader) string() string {
	n := r.uvarint()
	if !r.fits(n) {
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

func (r *recordReader) bool() bool {
	if r.err != nil {
		return false
	}
	if len(r.b) == 0 || r.b[0] > 1 {
		r.err = errors.New("truncated record or a bad boolean")
		return false
	}
	v := r.b[0] == 1
	r.b = r.b[1:]
	return v
}

func (r *recordReader) time() time.Time {
	if !r.bool() {
		return time.Time{}
	}
	sec := r.int()
	nsec := r.uvarint()
	if r.err == nil && nsec >= uint64(time.Second) {
		r.err = errors.New("nanoseconds out of range")
	}
	if r.err != nil {
		return time.Time{}
	}
	return time.Unix(int64(sec), int64(nsec)).UTC()
}

// len reads a slice's or map's length (appendLen). Each element takes at
// least one byte, so a length beyond the bytes left is refused before
// anything is allocated.
func (r *recordReader) len() (n int, isNil bool) {
	v := r.uvarint()
	if r.err != nil || v == 0 {
		return 0, true
	}
	if !r.fits(v - 1) {
		return 0, true
	}
	return int(v - 1), false
}
