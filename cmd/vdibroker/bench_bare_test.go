package main

import (
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
)

// TestMain lets this test binary stand in for vdibroker when a test starts
// it as a child process (bareProcess runs os.Executable()).
func TestMain(m *testing.M) {
	if os.Getenv("VDIBROKER_TEST_AS_CLI") == "1" {
		os.Exit(run(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// TestBareServerProcess: bench connect --baseline's bare server runs as a
// process of its own (as the broker does), answers a connect with 201 and
// a JSON body of the asked size, and goes away when stopped.
func TestBareServerProcess(t *testing.T) {
	t.Setenv("VDIBROKER_TEST_AS_CLI", "1")
	url, stop, err := bareProcess(300)
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			stop()
		}
	}()
	resp, err := http.Post(url+"/api/v1/hostpools/baseline/connect", "application/json", strings.NewReader(`{"user":"u1"}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || len(body) != 300 {
		t.Fatalf("bare answer: %d, %d bytes; want 201 and 300 bytes", resp.StatusCode, len(body))
	}
	stop()
	stopped = true
	if _, err := http.Post(url+"/api/v1/hostpools/baseline/connect", "application/json", strings.NewReader(`{"user":"u2"}`)); err == nil {
		t.Error("the bare server still answers after stop")
	}
}
