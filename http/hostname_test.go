package http_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/agent"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// Session host names are unique in their pool ignoring case and one
// trailing dot, as Windows and DNS compare host names (R-SEC, R-D3).

// postRegister posts a registration body as an agent does (no
// credential) and returns the status and the error body, if any.
func postRegister(t *testing.T, url, token, host string) (int, *vdibroker.Error) {
	t.Helper()
	body, _ := json.Marshal(vdibroker.RegisterRequest{Token: token, HostName: host, Address: "10.0.0.1:3389"})
	resp, err := http.Post(url+"/api/v1/agent/register", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct{ Error *vdibroker.Error }
	if resp.StatusCode >= 400 {
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatalf("register %s: status %d, body not JSON: %v", host, resp.StatusCode, err)
		}
	}
	return resp.StatusCode, out.Error
}

// TestRegisterSameNameIgnoringCase_RSEC: with office-01 registered, an
// agent that registers OFFICE-01 or office-01. gets the answer one that
// registers office-01 again gets: 409 Conflict naming hostName. An
// admin's PUT of a twin is refused alike (naming name), and a GET of one
// says which host has the name.
func TestRegisterSameNameIgnoringCase_RSEC(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	pool := uniq("hn")
	e.pool(pool, nil)
	rt, err := e.admin.CreateRegistrationToken(ctx, pool, vhttp.RegistrationTokenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	ag := &agent.Client{Server: e.urls[0], HTTP: http.DefaultClient}
	if _, err := ag.Register(ctx, vdibroker.RegisterRequest{Token: rt.Token, HostName: "office-01", Address: "10.0.0.1:3389"}); err != nil {
		t.Fatal(err)
	}
	status, same := postRegister(t, e.urls[0], rt.Token, "office-01")
	if status != http.StatusConflict || same == nil || same.Code != vdibroker.EConflict || same.Field != "hostName" {
		t.Fatalf("office-01 again: %d %+v; want 409 Conflict on hostName", status, same)
	}
	for _, name := range []string{"OFFICE-01", "Office-01.", "office-01."} {
		status, got := postRegister(t, e.urls[0], rt.Token, name)
		if status != http.StatusConflict || got == nil || got.Code != same.Code || got.Field != same.Field {
			t.Errorf("%s: %d %+v; want %d %s on %s, as office-01 again", name, status, got, http.StatusConflict, same.Code, same.Field)
			continue
		}
		if !strings.Contains(got.Message, `"office-01"`) {
			t.Errorf("%s: message %q does not name office-01", name, got.Message)
		}
	}
	// The agent's own client reads it as the broker's error.
	_, err = ag.Register(ctx, vdibroker.RegisterRequest{Token: rt.Token, HostName: "OFFICE-01"})
	var ve *vdibroker.Error
	if !errors.As(err, &ve) || ve.Code != vdibroker.EConflict || ve.Field != "hostName" {
		t.Errorf("agent client: %v; want Conflict on hostName", err)
	}

	_, err = e.admin.PutSessionHost(ctx, pool, "OFFICE-01", vhttp.SessionHostRequest{})
	if vdibroker.ErrorCode(err) != vdibroker.EConflict || vdibroker.ErrorField(err) != "name" {
		t.Errorf("PUT OFFICE-01: %v; want Conflict on name", err)
	}
	_, err = e.admin.GetSessionHost(ctx, pool, "OFFICE-01")
	if vdibroker.ErrorCode(err) != vdibroker.ENotFound || !strings.Contains(vdibroker.ErrorMessage(err), `"office-01"`) {
		t.Errorf("GET OFFICE-01: %v; want NotFound naming office-01", err)
	}
	hosts, err := e.admin.ListSessionHosts(ctx, pool)
	if err != nil || len(hosts) != 1 || hosts[0].Name != "office-01" {
		t.Errorf("hosts: %v, %v; want office-01 alone", hosts, err)
	}
}

// TestRegisterSameNameAtOnce_RD3: two agents register OFFICE-nn and
// office-nn at the same instant, each through its own replica (each with
// its own store handle on PostgreSQL): exactly one is registered, the
// other gets the 409 above.
func TestRegisterSameNameAtOnce_RD3(t *testing.T) {
	e := newEnvWith(t, envOptions{replicas: 2})
	ctx := context.Background()
	pool := uniq("hn")
	e.pool(pool, nil)
	rt, err := e.admin.CreateRegistrationToken(ctx, pool, vhttp.RegistrationTokenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	const rounds = 10
	for i := range rounds {
		names := []string{fmt.Sprintf("OFFICE-%02d", i), fmt.Sprintf("office-%02d.", i)}
		start := make(chan struct{})
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for j := range names {
			ag := &agent.Client{Server: e.urls[j], HTTP: http.DefaultClient}
			wg.Go(func() {
				<-start
				_, errs[j] = ag.Register(ctx, vdibroker.RegisterRequest{Token: rt.Token, HostName: names[j]})
			})
		}
		close(start)
		wg.Wait()
		if (errs[0] == nil) == (errs[1] == nil) {
			t.Fatalf("round %d: %s: %v; %s: %v; want one registered, one refused", i, names[0], errs[0], names[1], errs[1])
		}
		for _, err := range errs {
			var ve *vdibroker.Error
			if err != nil && (!errors.As(err, &ve) || ve.Code != vdibroker.EConflict || ve.Field != "hostName") {
				t.Errorf("round %d: refused with %v; want Conflict on hostName", i, err)
			}
		}
	}
	hosts, err := e.admin.ListSessionHosts(ctx, pool)
	if err != nil || len(hosts) != rounds {
		t.Errorf("%d hosts (%v); want %d, one of each pair", len(hosts), err, rounds)
	}
}

// TestRegistrationTokenForTwinName_RSEC: with office-01 registered, a
// registration token issued for OFFICE-01 or office-01. (its
// sessionHost) would register nothing, every registration of that name
// being refused as office-01's twin: its creation is refused as an
// admin's PUT of the twin is, 409 Conflict naming the field, and the
// message names office-01; no token is stored. A token for office-01 as
// written is issued (it claims the host again after a reset of its
// registration), and so is one for a name no host has.
func TestRegistrationTokenForTwinName_RSEC(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	pool := uniq("rt")
	e.pool(pool, nil)
	rt, err := e.admin.CreateRegistrationToken(ctx, pool, vhttp.RegistrationTokenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	e.register(rt.Token, "office-01")
	tokens := func() int {
		t.Helper()
		l, err := e.admin.ListRegistrationTokens(ctx, pool)
		if err != nil {
			t.Fatal(err)
		}
		return len(l)
	}
	for _, name := range []string{"OFFICE-01", "Office-01.", "office-01."} {
		body, _ := json.Marshal(map[string]string{"sessionHost": name})
		req, _ := http.NewRequest("POST", e.urls[0]+"/api/v1/hostpools/"+pool+"/registrationtoken", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+adminToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var out struct{ Error *vdibroker.Error }
		err = json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusConflict || out.Error == nil || out.Error.Code != vdibroker.EConflict || out.Error.Field != "sessionHost" {
			t.Errorf("token for %s: %d %+v (%v); want 409 Conflict on sessionHost", name, resp.StatusCode, out.Error, err)
			continue
		}
		if msg := out.Error.Message; !strings.Contains(msg, `"office-01"`) || !strings.Contains(msg, fmt.Sprintf("%q", name)) {
			t.Errorf("token for %s: message %q does not name both hosts", name, msg)
		}
	}
	if n := tokens(); n != 1 {
		t.Errorf("%d registration tokens after the refusals, want the first alone", n)
	}

	// The host's own name: a token to register it again.
	own, err := e.admin.CreateRegistrationToken(ctx, pool, vhttp.RegistrationTokenRequest{SessionHost: "office-01"})
	if err != nil {
		t.Fatalf("token for office-01 itself: %v", err)
	}
	if err := e.admin.ResetRegistration(ctx, pool, "office-01"); err != nil {
		t.Fatal(err)
	}
	e.register(own.Token, "office-01")
	if _, err := e.admin.CreateRegistrationToken(ctx, pool, vhttp.RegistrationTokenRequest{SessionHost: "office-02"}); err != nil {
		t.Errorf("token for office-02, which no host has: %v", err)
	}
	if n := tokens(); n != 3 {
		t.Errorf("%d registration tokens, want 3", n)
	}
}
