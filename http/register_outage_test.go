package http_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// TestRegisterDuringOutage_ROUT1 (R-OUT1, R-SEC): while the store is
// down a registration is answered 503 StoreUnavailable with a
// Retry-After, which the agent waits for before it registers again (its
// registrationWait), not a refusal that would stop it; it spends none of
// its token's new hosts, and registers once the store is back.
func TestRegisterDuringOutage_ROUT1(t *testing.T) {
	e := newEnvWith(t, envOptions{failing: true})
	ctx := context.Background()
	p := uniq("regout")
	e.pool(p, nil)
	tok, err := e.admin.CreateRegistrationToken(ctx, p, vhttp.RegistrationTokenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	e.clock.Freeze()
	vhttp.BoundNewHosts(e.srvs[0].Server, 1)
	body, _ := json.Marshal(&vdibroker.RegisterRequest{Token: tok.Token, HostName: "regout-h1", Address: "regout-h1.example.test:3389"})

	e.storeDown[0].Store(true)
	if got := healthStatus(t, e.urls[0]+"/healthz"); got != http.StatusServiceUnavailable {
		t.Fatalf("/healthz with the store down: %d, want 503", got)
	}
	for range 3 {
		res, err := http.Post(e.urls[0]+"/api/v1/agent/register", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(res.Body)
		res.Body.Close()
		var answer struct {
			Error struct{ Code string } `json:"error"`
		}
		json.Unmarshal(data, &answer)
		if ra, _ := strconv.Atoi(res.Header.Get("Retry-After")); res.StatusCode != http.StatusServiceUnavailable || ra <= 0 ||
			answer.Error.Code != vdibroker.EStoreUnavailable {
			t.Fatalf("a registration with the store down: %d Retry-After %q %s; want 503 StoreUnavailable with a Retry-After",
				res.StatusCode, res.Header.Get("Retry-After"), data)
		}
	}
	e.storeDown[0].Store(false)
	waitHealth(t, e.urls[0], http.StatusOK, 15*time.Second)
	// The token's one new host was not spent by the refused registrations.
	if _, err := e.admin.Register(ctx, &vdibroker.RegisterRequest{Token: tok.Token, HostName: "regout-h1", Address: "regout-h1.example.test:3389"}); err != nil {
		t.Fatalf("the registration once the store is back: %v", err)
	}
}
