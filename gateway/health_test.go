package gateway

import (
	"crypto/ed25519"
	"crypto/tls"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vdibroker/vdibroker/gatewaytoken"
	"github.com/vdibroker/vdibroker/internal/echotest"
	"github.com/vdibroker/vdibroker/internal/syncbuf"
)

// TestHealthz_RGW6: GET /healthz on the gateway's listener answers 503
// keys_unavailable while the gateway holds no token keys (started before
// its broker, R-GW6), 200 once it has read them, and 503 closing once it
// stops; ?live is 200 throughout. An anonymous caller's probes, past the
// per-address request rate, are each answered, and leave no log line, no
// entry in the address table and no refusal; the answer is the reason
// alone. The tunnel route beside it is unchanged: a token's tunnel opens
// once the keys are read.
func TestHealthz_RGW6(t *testing.T) {
	signer, err := gatewaytoken.GenerateSigner("k1")
	if err != nil {
		t.Fatal(err)
	}
	keysFile := filepath.Join(t.TempDir(), "keys.json")
	keys := gatewaytoken.NewPendingKeyring(gatewaytoken.FileSource{Path: keysFile}, 0, nil, nil)
	var logs syncbuf.Buffer
	reg := prometheus.NewRegistry()
	broker := &MemoryBroker{}
	// The default request rate and burst (5 a second, 20).
	gw, err := New(Config{Name: "gw-health", Verifier: keys, Broker: broker, Registry: reg,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	// The mux of `vdibroker gateway` and `serve --gateway-listen`.
	mux := http.NewServeMux()
	mux.Handle(Path, gw)
	mux.HandleFunc("GET "+HealthPath, gw.ServeHealth)
	srv := httptest.NewUnstartedServer(mux)
	srv.EnableHTTP2 = false
	srv.StartTLS()
	t.Cleanup(func() { srv.Close(); gw.Close() })
	client := srv.Client()
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := client.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("GET %s: Content-Type %q, want application/json", path, ct)
		}
		return resp.StatusCode, string(b)
	}

	const noKeys = `{"status":"unavailable","reason":"keys_unavailable"}` + "\n"
	for i := range 50 { // more than the burst of 20 a tunnel request gets
		if code, body := get(HealthPath); code != http.StatusServiceUnavailable || body != noKeys {
			t.Fatalf("probe %d without keys: %d %q, want 503 %q", i, code, body, noKeys)
		}
	}
	if code, body := get(HealthPath + "?live"); code != http.StatusOK || body != `{"status":"live"}`+"\n" {
		t.Errorf("?live without keys: %d %q, want 200 live", code, body)
	}
	if got := logs.String(); got != "" {
		t.Errorf("the probes wrote log lines:\n%s", got)
	}
	if st := gw.Stats(); st.Addresses != 0 || st.Preauth != 0 {
		t.Errorf("the probes are held by the gateway: %+v", st)
	}
	if mfs, err := reg.Gather(); err != nil {
		t.Fatal(err)
	} else {
		for _, mf := range mfs {
			if mf.GetName() == "vdibroker_gateway_refusals_total" {
				t.Errorf("the probes counted refusals: %v", mf.GetMetric())
			}
		}
	}

	// The broker's keys arrive.
	doc, err := gatewaytoken.MarshalJWKS(map[string]ed25519.PublicKey{"k1": signer.PublicKey()})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keysFile, doc, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := keys.Reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	if code, body := get(HealthPath); code != http.StatusOK || body != `{"status":"ok"}`+"\n" {
		t.Errorf("with keys: %d %q, want 200 ok", code, body)
	}
	// A tunnel through the same listener.
	host := echotest.Listen(t)
	e := &env{t: t, gw: gw, addr: srv.Listener.Addr().String(), tls: &tls.Config{InsecureSkipVerify: true},
		signer: signer, broker: broker, reg: reg, host: host, now: time.Now()}
	c, err := e.dial(e.token(nil), host, false)
	if err != nil {
		t.Fatalf("a tunnel beside /healthz: %v", err)
	}
	echo(t, c, 1000)
	c.Close()

	gw.Close()
	if code, body := get(HealthPath); code != http.StatusServiceUnavailable || body != `{"status":"unavailable","reason":"closing"}`+"\n" {
		t.Errorf("closed: %d %q, want 503 closing", code, body)
	}
}
