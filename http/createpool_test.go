package http_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"testing"

	"github.com/vdibroker/vdibroker"
)

// TestPutHostPoolIfNoneMatch: PUT /hostpools/{pool} with If-None-Match: *
// creates and never replaces: 201, then 412 PreconditionFailed (R-E13, as
// every resource's) with the first
// settings kept, also when creates race; any other If-None-Match value is
// a 400 naming the header.
func TestPutHostPoolIfNoneMatch(t *testing.T) {
	e := newEnv(t)
	name := uniq("inm")
	put := func(inm string, limit int) (int, vdibroker.Error) {
		body, _ := json.Marshal(map[string]any{"maxSessionLimit": limit})
		req, _ := http.NewRequest("PUT", e.urls[0]+"/api/v1/hostpools/"+name, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+adminToken)
		req.Header.Set("Content-Type", "application/json")
		if inm != "" {
			req.Header.Set("If-None-Match", inm)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct{ Error vdibroker.Error }
		json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out.Error
	}
	if code, _ := put("*", 7); code != http.StatusCreated {
		t.Fatalf("create: %d, want 201", code)
	}
	if code, apiErr := put("*", 9); code != http.StatusPreconditionFailed || apiErr.Code != vdibroker.EPreconditionFailed {
		t.Errorf("second create: %d %+v, want 412 PreconditionFailed", code, apiErr)
	}
	if code, apiErr := put(`"v1"`, 9); code != http.StatusBadRequest || apiErr.Field != "If-None-Match" {
		t.Errorf("If-None-Match with an entity tag: %d %+v, want 400 naming If-None-Match", code, apiErr)
	}
	if p, err := e.admin.GetHostPool(context.Background(), name); err != nil || p.MaxSessionLimit != 7 {
		t.Errorf("after refused creates: %+v, %v; want maxSessionLimit 7", p, err)
	}
	if code, _ := put("", 9); code != http.StatusOK {
		t.Errorf("plain PUT replaces: %d, want 200", code)
	}

	race := uniq("inmrace")
	var wg sync.WaitGroup
	var mu sync.Mutex
	created, conflicts := 0, 0
	for i := range 8 {
		wg.Go(func() {
			_, err := e.admin.CreateHostPool(context.Background(), race, map[string]any{"maxSessionLimit": 10 + i})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				created++
			case vdibroker.ErrorCode(err) == vdibroker.EPreconditionFailed:
				conflicts++
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if created != 1 || conflicts != 7 {
		t.Errorf("8 racing creates: %d created, %d PreconditionFailed; want 1 and 7", created, conflicts)
	}
}
