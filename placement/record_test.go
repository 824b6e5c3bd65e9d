package placement

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

// TestRecordRoundTrip_RC7: a record stored in the compact form reads back
// as the same value, and the API's JSON of it (RecordJSON) is the JSON the
// record had before it was stored.
func TestRecordRoundTrip_RC7(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ex := genExplain(t)
		ex.OutageMode = rapid.Bool().Draw(t, "outage")
		ex.StartedOnConnect = rapid.Bool().Draw(t, "started")
		if rapid.Bool().Draw(t, "gateway") {
			ex.Gateway = &GatewayReach{Name: rapid.String().Draw(t, "gw"), Time: time.Unix(rapid.Int64Range(0, 1<<33).Draw(t, "gwsec"), 0).UTC()}
		}
		stored := AppendRecord(nil, &ex)
		got, err := DecodeRecord(stored)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		if diff := cmp.Diff(ex, got); diff != "" {
			t.Fatalf("round trip (-stored +read):\n%s", diff)
		}
		want, _ := json.Marshal(&ex)
		answer, err := RecordJSON(stored, nil)
		if err != nil || !bytes.Equal(answer, want) {
			t.Fatalf("RecordJSON = %s, %v; want %s", answer, err, want)
		}
	})
}

// TestRecordCoversEveryField: every field of the record, set to a value
// other than its zero, survives the compact form. A field added to
// Explain (or to a type it holds) and not to AppendRecord and
// DecodeRecord fails here instead of vanishing from stored records.
func TestRecordCoversEveryField(t *testing.T) {
	var ex Explain
	fill(reflect.ValueOf(&ex).Elem(), 1)
	got, err := DecodeRecord(AppendRecord(nil, &ex))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(ex, got); diff != "" {
		t.Fatalf("fields lost by the stored form (-set +read):\n%s", diff)
	}
}

// fill sets every field reachable from v to a value other than its zero.
func fill(v reflect.Value, n int) {
	switch v.Kind() {
	case reflect.String:
		v.SetString("s" + string(rune('a'+n%26)))
	case reflect.Int, reflect.Int64:
		v.SetInt(int64(n))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), n+1)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		for i := range 2 {
			fill(v.Index(i), n+i+1)
		}
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k, n+1)
		fill(e, n+2)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Struct:
		if v.Type() == reflect.TypeOf(time.Time{}) {
			v.Set(reflect.ValueOf(time.Unix(1700000000+int64(n), 123456789).UTC()))
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), n+i+1)
			}
		}
	default:
		panic("fill: a kind the record codec does not know: " + v.Kind().String())
	}
}

// TestRecordReadsJSON: records stored as JSON (before the compact form)
// still read, and are answered as stored.
func TestRecordReadsJSON(t *testing.T) {
	stored := []byte(`{"hostPool":"p","user":"alice","algorithm":"BreadthFirst","time":"2026-12-01T10:00:00Z",` +
		`"candidates":[{"host":"h1","sessions":2,"connecting":1,"loadIndex":0}],"candidateCount":1,"excluded":null,` +
		`"chosen":"h1","rank":1,"draw":{"of":1,"value":0}}`)
	got, err := DecodeRecord(stored)
	if err != nil {
		t.Fatal(err)
	}
	want := Explain{Pool: "p", User: "alice", Algorithm: "BreadthFirst", Time: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC),
		Candidates: []Candidate{{Host: "h1", Sessions: 2, Connecting: 1}}, CandidateCount: 1, Chosen: "h1", Rank: 1, Draw: &Draw{Of: 1}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("JSON record (-want +got):\n%s", diff)
	}
	if answer, err := RecordJSON(stored, nil); err != nil || !bytes.Equal(answer, stored) {
		t.Fatalf("RecordJSON of a JSON record = %s, %v; want it as stored", answer, err)
	}
	gw := &GatewayReach{Name: "gw1", Time: time.Date(2026, 12, 1, 10, 1, 0, 0, time.UTC)}
	answer, err := RecordJSON(stored, gw)
	if err != nil || !bytes.Contains(answer, []byte(`"gateway":{"name":"gw1","time":"2026-12-01T10:01:00Z"}`)) {
		t.Fatalf("RecordJSON with a gateway = %s, %v", answer, err)
	}
}

// TestRecordSize: the compact form of a full record (ExplainLimit
// candidates) is a fraction of its JSON, which is what it is for.
func TestRecordSize(t *testing.T) {
	ex := Explain{Pool: "bench500", User: "bench-1796393781-r1-00027", Algorithm: "BreadthFirst", Time: time.Now().UTC(),
		CandidateCount: 500, Chosen: "hb017", Rank: 17, Draw: &Draw{Of: 250, Value: 16}}
	for i := range ExplainLimit {
		ex.Candidates = append(ex.Candidates, Candidate{Host: "hb" + string(rune('0'+i/10)) + string(rune('0'+i%10)), Sessions: 3})
	}
	js, _ := json.Marshal(&ex)
	compact := AppendRecord(nil, &ex)
	// 50 candidates of 5-byte names: 1 + 5 + 4 bytes each against about
	// 60 bytes of JSON each.
	if len(compact)*4 > len(js) {
		t.Fatalf("compact record %d bytes, JSON %d: want under a quarter", len(compact), len(js))
	}
}

// TestRecordRefusesGarbage: a truncated or damaged stored record is an
// error, not a panic or a made-up record.
func TestRecordRefusesGarbage(t *testing.T) {
	ex := Explain{Pool: "p", User: "u", Candidates: []Candidate{{Host: "h1"}}, ExcludedCounts: map[string]int{"AtLimit": 3}}
	full := AppendRecord(nil, &ex)
	for n := range len(full) {
		if _, err := DecodeRecord(full[:n]); err == nil {
			t.Errorf("a record cut to %d of %d bytes decoded", n, len(full))
		}
	}
	if _, err := DecodeRecord(append(bytes.Clone(full), 0)); err == nil {
		t.Error("a record with a byte after its last field decoded")
	}
	if _, err := DecodeRecord([]byte{recordVersion, 0xff, 0xff, 0xff, 0xff, 0x0f}); err == nil {
		t.Error("a length past the end decoded")
	}
}

// FuzzDecodeRecord: any bytes decode or fail without panicking, and what
// decodes from the compact form encodes back to the same record.
func FuzzDecodeRecord(f *testing.F) {
	ex := Explain{Pool: "p", User: "u", Algorithm: "DepthFirst", Time: time.Unix(1, 2).UTC(), Candidates: []Candidate{{Host: "h"}},
		Excluded: []Exclusion{{Host: "x", Reason: ReasonDrained}}, ExcludedCounts: map[string]int{ReasonDrained: 1}, Draw: &Draw{Of: 2, Value: 1}}
	f.Add(AppendRecord(nil, &ex))        // a full record
	f.Add(AppendRecord(nil, &Explain{})) // every field empty
	f.Add([]byte(`{"hostPool":"p"}`))    // a JSON record of before
	f.Add([]byte{recordVersion, 0x80})   // a number cut short
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := DecodeRecord(b)
		if err != nil || len(b) == 0 || b[0] != recordVersion {
			return
		}
		again, err := DecodeRecord(AppendRecord(nil, &e))
		if err != nil {
			t.Fatalf("re-encoded record does not decode: %v", err)
		}
		if diff := cmp.Diff(e, again); diff != "" {
			t.Fatalf("re-encoded record differs:\n%s", diff)
		}
	})
}

func BenchmarkRecord(b *testing.B) {
	ex := Explain{Pool: "bench500", User: "bench-1796393781-r1-00027", Algorithm: "BreadthFirst", Time: time.Now().UTC(),
		CandidateCount: 500, Chosen: "hb017", Rank: 17, Draw: &Draw{Of: 250, Value: 16}}
	for i := range ExplainLimit {
		ex.Candidates = append(ex.Candidates, Candidate{Host: "hb0" + string(rune('0'+i/10)) + string(rune('0'+i%10)), Sessions: 3})
	}
	b.Run("compact", func(b *testing.B) {
		var n int
		for b.Loop() {
			n = len(AppendRecord(nil, &ex))
		}
		b.ReportMetric(float64(n), "bytes")
	})
	b.Run("json", func(b *testing.B) {
		var n int
		for b.Loop() {
			js, _ := json.Marshal(&ex)
			n = len(js)
		}
		b.ReportMetric(float64(n), "bytes")
	})
}
