package http_test

import (
	"context"
	"errors"
	nethttp "net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// TestPeerErrorMessageWithoutControlCharacters: a peer pod's error
// message becomes this pod's answer to a global connect and a line of
// its log; a peer that is not what it should be may send any text, so
// no control character of it is kept (C0 and DEL were replaced before,
// C1 such as U+009B, a CSI in one character, passed) (R-SEC).
func TestPeerErrorMessageWithoutControlCharacters(t *testing.T) {
	peer := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(nethttp.StatusNotFound)
		w.Write([]byte(`{"error": {"code": "NotFound", "message": "no such pool\u009b2J\u001b[31m\u0085forged\u007f"}}`))
	}))
	defer peer.Close()
	c := vhttp.NewPodClient("pod-a", []byte("0123456789abcdef0123456789abcdef"))
	_, err := c.Loads(context.Background(), vdibroker.Pod{Name: "pod-b", URL: peer.URL})
	var ve *vdibroker.Error
	if !errors.As(err, &ve) || ve.Code != vdibroker.ENotFound {
		t.Fatalf("peer's error: %v, want NotFound", err)
	}
	if !strings.HasPrefix(ve.Message, "no such pool") || strings.IndexFunc(ve.Message, unicode.IsControl) >= 0 {
		t.Errorf("message %q: want the peer's text without control characters", ve.Message)
	}
}
