package http_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	nethttp "net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/federation"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// hostilePeer answers every pod-to-pod call 200 with answer(its path),
// as a pod that is compromised, or whatever answers at its URL, may:
// what a peer answers is chosen by it (R-G5, R-SEC). With length the answer carries its Content-Length,
// else it is sent chunked.
func hostilePeer(t *testing.T, answer func(path string) []byte, length bool) *httptest.Server {
	t.Helper()
	peer := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		b := answer(r.URL.Path)
		w.Header().Set("Content-Type", "application/json")
		if length {
			w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		}
		w.WriteHeader(nethttp.StatusOK)
		w.Write(b)
	}))
	t.Cleanup(peer.Close)
	return peer
}

// podCall is a call of c to the pod p whose answer only its error tells.
type podCall func(c *vhttp.PodClient, p vdibroker.Pod) error

// podLoads, podSessions and podDocument are the pod-to-pod calls whose
// answers hold lists: a pod's loads, alice's sessions in office, and the
// document of generation 2 put by admin.
func podLoads(c *vhttp.PodClient, p vdibroker.Pod) error {
	_, err := c.Loads(context.Background(), p)
	return err
}

func podSessions(c *vhttp.PodClient, p vdibroker.Pod) error {
	_, err := c.Sessions(context.Background(), p, vdibroker.PodSessionsRequest{User: "alice", HostPools: []string{"office"}})
	return err
}

func podDocument(c *vhttp.PodClient, p vdibroker.Pod) error {
	_, err := c.PutDocument(context.Background(), p, vdibroker.PodDocumentRequest{Document: vdibroker.Federation{Generation: 2}, Principal: "admin"})
	return err
}

// podOneWithOffice starts pod1 (fedPodOne) and puts its document: pod1
// and pod2, at peerURL, of site s, and the global entitlement office of
// all users, its one member pod2's pool office. It returns pod1's admin
// client.
func podOneWithOffice(t *testing.T, peerURL string) *vhttp.Client {
	t.Helper()
	_, ts := fedPodOne(t)
	admin := vhttp.NewClient(ts.URL, adminToken)
	doc := &vdibroker.Federation{Generation: 1, Sites: []vdibroker.Site{{Name: "s"}},
		Pods: []vdibroker.Pod{{Name: "pod1", Site: "s", URL: ts.URL}, {Name: "pod2", Site: "s", URL: peerURL}},
		GlobalEntitlements: []vdibroker.GlobalEntitlement{{Name: "office", AllUsers: true,
			Members: []vdibroker.Member{{Pod: "pod2", HostPool: "office"}}}}}
	if _, err := admin.PutFederation(t.Context(), doc); err != nil {
		t.Fatal(err)
	}
	return admin
}

// jsonList is a JSON object whose field holds n copies of elem.
func jsonList(field, elem string, n int) []byte {
	var b strings.Builder
	b.WriteString(`{"` + field + `":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(elem)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

// padded is the JSON object {field: a string of n bytes}, valid for every
// answer it stands for (the others' fields absent).
func padded(field string, n int) []byte {
	return []byte(`{"` + field + `":"` + strings.Repeat("x", n) + `"}`)
}

// TestPodAnswersBounded_RG5: a peer's answer to each pod-to-pod call is
// bounded before it is decoded (R-G5, R-SEC), in bytes (every call) and in
// JSON objects (each one a struct in memory: an answer of empty objects,
// `[{},{},...]`, took some 70 bytes for each of its 3, and the 64 MiB the
// client read before, some 5 GB). An answer over a bound is the call's
// failure, naming the bound, and is never decoded; one within them is
// taken. Before, each of these answers (all valid JSON) was read whole
// and decoded.
func TestPodAnswersBounded_RG5(t *testing.T) {
	ctx := context.Background()
	const mib = 1 << 20
	lookup := func(c *vhttp.PodClient, p vdibroker.Pod) error {
		_, err := c.Lookup(ctx, p, vdibroker.PodLookupRequest{User: "alice"})
		return err
	}
	connect := func(c *vhttp.PodClient, p vdibroker.Pod) error {
		_, err := c.Connect(ctx, p, vdibroker.PodConnectRequest{GlobalEntitlement: "office", HostPool: "office", User: "alice"})
		return err
	}
	register := func(c *vhttp.PodClient, p vdibroker.Pod) error {
		return c.Register(ctx, p, vdibroker.PodDirectoryRequest{Generation: 1, Users: []string{"alice"}})
	}
	command := func(c *vhttp.PodClient, p vdibroker.Pod) error {
		_, err := c.SessionCommand(ctx, p, vdibroker.PodSessionCommandRequest{User: "alice", ID: "s1", HostPools: []string{"office"}, Command: vdibroker.CommandLogoff})
		return err
	}
	pool := `{"hostPool":"p","found":true,"hosts":1}`
	session := `{"id":"s","user":"alice","hostPool":"office","state":"Active"}`
	for _, tc := range []struct {
		name   string
		call   podCall
		answer []byte
		want   string // in the error; "" for an answer taken
	}{
		// Loads: a member pool's facts each; a valid document gives a pod
		// at most federation.MaxDocumentMembers (10,000) member pools.
		{"loads within its bounds", podLoads, jsonList("pools", pool, 10000), ""},
		{"loads over 8 MiB", podLoads, padded("pod", 8*mib), "more than 8388608 bytes"},
		{"loads of 10,001 pools", podLoads, jsonList("pools", pool, 10001), "more than 10001 JSON objects"},
		{"loads of 40,000 empty pools", podLoads, jsonList("pools", "{}", 40000), "more than 10001 JSON objects"},
		// Sessions: at most 65,536 (64 users asked, in 256 pools).
		{"sessions within their bounds", podSessions, jsonList("sessions", session, 1000), ""},
		{"sessions over 8 MiB", podSessions, jsonList("sessions", `{"id":"`+strings.Repeat("s", 1000)+`"}`, 9000), "more than 8388608 bytes"},
		{"sessions of 65,536 empty ones", podSessions, jsonList("sessions", "{}", 65536), "more than 65536 JSON objects"},
		// The others answer one object (no list of them to grow in
		// memory): their bytes are bounded.
		{"a look-up within its bounds", lookup, []byte(`{"pods":["pod2"],"complete":{"pod2":1}}`), ""},
		{"a look-up over 256 KiB", lookup, jsonList("pods", `"pod2"`, 40000), "more than 262144 bytes"},
		{"a connect over 1 MiB", connect, padded("rdpFile", mib), "more than 1048576 bytes"},
		{"a registration over 1 MiB", register, padded("x", mib), "more than 1048576 bytes"},
		{"a command over 1 MiB", command, padded("result", mib), "more than 1048576 bytes"},
		{"a document over 2 MiB", podDocument, padded("x", 2*mib), "more than 2097152 bytes"},
		{"a document of 65,537 objects", podDocument, jsonList("homeSites", "{}", 65536), "more than 65536 JSON objects"},
	} {
		for _, length := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s, Content-Length %v", tc.name, length), func(t *testing.T) {
				var sent atomic.Bool
				peer := hostilePeer(t, func(string) []byte { sent.Store(true); return tc.answer }, length)
				c := vhttp.NewPodClient("pod1", []byte(testFedSecret))
				err := tc.call(c, vdibroker.Pod{Name: "pod2", URL: peer.URL})
				if !sent.Load() {
					t.Fatal("the peer was not asked")
				}
				if tc.want == "" {
					if err != nil {
						t.Fatalf("an answer within the bounds: %v", err)
					}
					return
				}
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("got %v, want a failure saying %q", err, tc.want)
				}
				// Not a refusal the peer answered (whose code would be
				// passed on as the peer's word), but the call's failure:
				// the peer is passed over for a while (R-G5).
				var ve *vdibroker.Error
				if errors.As(err, &ve) {
					t.Errorf("got %v, a vdibroker error; want the call's failure", err)
				}
			})
		}
	}
}

// TestPodAnswerOverItsBoundThroughAPod_RG5: a pod whose document lists a
// peer that answers its loads with more pools than a document can give it
// says so in the peer's health and its members' facts, as for a peer that
// does not answer (R-G5), instead of decoding it (SQLite store, real HTTP
// servers on loopback).
func TestPodAnswerOverItsBoundThroughAPod_RG5(t *testing.T) {
	peerAnswer := jsonList("pools", `{}`, 20000)
	var asked atomic.Int32
	peer := hostilePeer(t, func(path string) []byte {
		if path == federation.LoadsPath {
			asked.Add(1)
		}
		return peerAnswer
	}, false)
	admin := podOneWithOffice(t, peer.URL)
	fs, err := admin.GetFederation(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if asked.Load() == 0 {
		t.Fatal("pod2 was not asked for its loads")
	}
	const want = "more than 10001 JSON objects"
	if len(fs.Peers) != 1 || !strings.Contains(fs.Peers[0].Health, want) {
		b, _ := json.Marshal(fs.Peers)
		t.Errorf("peers %s: want pod2's health saying %q", b, want)
	}
	ge, err := admin.GetGlobalEntitlement(t.Context(), "office")
	if err != nil {
		t.Fatal(err)
	}
	if len(ge.Members) != 1 || !strings.Contains(ge.Members[0].Error, want) || ge.Members[0].Facts != nil {
		b, _ := json.Marshal(ge.Members)
		t.Errorf("members %s: want pod2's member without facts, saying %q", b, want)
	}
}

// TestPodAnswerListsOfObjectsOnly_RG5: the lists of objects in a peer's
// answer (a pod's pools, a user's sessions, a document's sites, pods,
// entitlements, members and home sites) are taken of objects only (R-G5,
// R-SEC). encoding/json grows a list by an element for each value it
// meets, whatever its kind, and goes on past one of the wrong kind, so
// the bound on objects alone let `[0,0,...]` through: 8 MiB of it for a
// peer's pools allocated some 2.7 GB (4 million pools' facts), for a
// user's sessions 1.2 GB, 2 MiB of it for a document's home sites 0.3 GB.
// And a null among a user's sessions was a nil session, which crashed
// the pod that asked (TestPeerNullSessionAnswer_RG5). Each such answer is
// now the call's failure, decoded no further than its first element: the
// call allocates a few times the answer's size at most (reading it).
func TestPodAnswerListsOfObjectsOnly_RG5(t *testing.T) {
	const mib = 1 << 20
	// fill is a list of elem filling about n bytes.
	fill := func(elem string, n int) string {
		return "[" + strings.Repeat(elem+",", n/(len(elem)+1)-1) + elem + "]"
	}
	for _, tc := range []struct {
		name   string
		call   podCall
		answer func(elem string) []byte
	}{
		{"pools", podLoads, func(e string) []byte { return []byte(`{"pools":` + fill(e, 8*mib-100) + `}`) }},
		{"sessions", podSessions, func(e string) []byte { return []byte(`{"sessions":` + fill(e, 8*mib-100) + `}`) }},
		{"a document's home sites", podDocument, func(e string) []byte { return []byte(`{"generation":2,"homeSites":` + fill(e, 2*mib-100) + `}`) }},
		{"a document's entitlements", podDocument, func(e string) []byte {
			return []byte(`{"generation":2,"globalEntitlements":` + fill(e, 2*mib-100) + `}`)
		}},
		{"an entitlement's members", podDocument, func(e string) []byte {
			return []byte(`{"generation":2,"globalEntitlements":[{"name":"g","members":` + fill(e, 2*mib-100) + `}]}`)
		}},
	} {
		// Every kind of value but an object; null is a nil session.
		for _, elem := range []string{"0", "null", "[]", `""`, "true"} {
			t.Run(tc.name+" of "+elem, func(t *testing.T) {
				answer := tc.answer(elem)
				peer := hostilePeer(t, func(string) []byte { return answer }, false)
				c := vhttp.NewPodClient("pod1", []byte(testFedSecret))
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				err := tc.call(c, vdibroker.Pod{Name: "pod2", URL: peer.URL})
				runtime.ReadMemStats(&after)
				const want = "not a JSON object"
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("got %v, want a failure saying %q", err, want)
				}
				var ve *vdibroker.Error
				if errors.As(err, &ve) {
					t.Errorf("got %v, a vdibroker error; want the call's failure", err)
				}
				// Reading the answer takes about twice its size (a
				// growing buffer); decoding it took hundreds of times.
				if got, limit := after.TotalAlloc-before.TotalAlloc, uint64(8*len(answer)); got > limit {
					t.Errorf("the call allocated %d MB for an answer of %d MB, want at most %d MB", got>>20, len(answer)>>20, limit>>20)
				}
			})
		}
	}
}

// TestPeerNullSessionAnswer_RG5: a peer answering a user's sessions with
// a null among them (R-G5, R-SEC) is a peer that did not answer, said in
// the listing of the user's sessions, and the pod that asked goes on:
// the null was a nil session, and the listing's look-up, in a goroutine
// of its own, read its user and crashed the whole pod (SQLite store, real
// HTTP servers on loopback).
func TestPeerNullSessionAnswer_RG5(t *testing.T) {
	peer := hostilePeer(t, func(path string) []byte {
		if path == federation.LoadsPath {
			return []byte(`{"pod":"pod2","site":"s","generation":1,"pools":[{"hostPool":"office","found":true,"hosts":1,"hasCapacity":true}]}`)
		}
		return []byte(`{"sessions":[null]}`)
	}, true)
	admin := podOneWithOffice(t, peer.URL)
	gs, err := admin.GlobalSessions(t.Context(), "alice")
	if err != nil {
		t.Fatal(err)
	}
	const want = "not a JSON object"
	if len(gs.Value) != 0 || !strings.Contains(gs.Unanswered["pod2"], want) {
		b, _ := json.Marshal(gs)
		t.Errorf("alice's sessions %s: want none, pod2 unanswered saying %q", b, want)
	}
}
