package main

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/spf13/cobra"
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
	url, _, stop, err := bareProcess(300)
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

// TestBenchConnectRounds: bench connect --rounds runs the broker phase and
// the bare phase that many times, each broker round with users of its own
// (so every round places new sessions, not reconnects, R-C1), and prints
// each round's ratio and the median.
func TestBenchConnectRounds(t *testing.T) {
	t.Setenv("VDIBROKER_TEST_AS_CLI", "1") // bareProcess runs this binary
	b := startCLIBroker(t)
	b.ok("hostpool", "create", "--name", "benchhp", "--load-balancer-type", "BreadthFirst", "--max-session-limit", "10")
	b.addHost("benchhp", "sh-01")
	b.addHost("benchhp", "sh-02")

	root := &cobra.Command{Use: "vdibroker", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(newBenchCmd())
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"bench", "connect", "--server", b.m.URL(), "--token", b.m.AdminToken, "--host-pool", "benchhp",
		"--connects", "6", "--concurrency", "2", "--user-prefix", "t-", "--baseline", "--rounds", "3"})
	if err := root.ExecuteContext(t.Context()); err != nil {
		t.Fatalf("bench connect: %v\n%s", err, out.String())
	}
	text := out.String()
	for _, want := range []string{"round 1: broker", "round 3: broker", "round 3: bare net/http server (own process)", "median ratio", "over 3 rounds"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	if strings.Count(text, "errors       none") != 6 {
		t.Errorf("want 6 phases without errors:\n%s", text)
	}
	users := b.ok("usersession", "list", "--host-pool", "benchhp", "--query", "[].user", "-o", "tsv")
	if n := len(strings.Fields(users)); n != 18 {
		t.Errorf("3 rounds of 6 connects stored %d sessions, want 18 (distinct users per round):\n%s", n, users)
	}
	if !strings.Contains(users, "t-r2-1") || !strings.Contains(users, "t-r3-6") {
		t.Errorf("round users not named t-r<round>-<n>:\n%s", users)
	}
}
