//go:build unix

package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker/federation"
)

// TestFederationSecretRotation_RG5: two real pods, each with its own copy
// of the secret file, take a new federation secret pod by pod with SIGHUP
// and no restart: the new one added second everywhere (each still signs
// with the old), then first everywhere, then the old one dropped. At every
// step each pod's global connect reaches the other (its sessions call is
// signed and taken), a call signed with a secret a pod holds is taken and
// one with a secret it dropped is refused. A file that does not read keeps
// the secrets in force; a pod left on another secret is refused both ways.
func TestFederationSecretRotation_RG5(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: builds the binary and runs two pods")
	}
	const (
		oldSecret = "old-federation-secret-0123456789"
		newSecret = "new-federation-secret-9876543210"
	)
	dir := t.TempDir()
	bin := e2eBuild(t, dir)
	files := map[string]string{}
	write := func(pod string, secrets ...string) {
		t.Helper()
		if err := os.WriteFile(files[pod], []byte(strings.Join(secrets, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	start := func(name, site string) *fedPod {
		files[name] = filepath.Join(dir, name+".secret")
		write(name, oldSecret)
		return startPod(t, bin, dir, files[name], name, site)
	}
	fra1, nyc1 := start("fra1", "emea"), start("nyc1", "amer")
	pods := []*fedPod{fra1, nyc1}
	for _, p := range pods {
		addPool(t, p, "office-"+p.name, 10)
		addPool(t, p, "small-"+p.name, 1)
		addCRM(t, p)
	}
	for _, p := range pods {
		p.api.call("PUT", "/federation", fedDocument(pods, 1), 201, nil)
	}

	// hup has p read its secret file again and waits for its log line.
	hup := func(p *fedPod, line string) {
		t.Helper()
		before := strings.Count(p.proc.stderr.String(), line)
		if err := p.proc.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for strings.Count(p.proc.stderr.String(), line) == before {
			if time.Now().After(deadline) {
				t.Fatalf("%s did not log %q after SIGHUP:\n%s", p.name, line, p.proc.stderr.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// reaches says whether a global dry run at from asked to for the
	// user's sessions and was answered: a sessions call each time, signed
	// with from's first secret, checked against to's.
	reaches := func(from, to *fedPod) bool {
		t.Helper()
		var a globalAnswer
		from.api.call("POST", "/globalentitlements/office/connect", map[string]any{"user": "rotation", "dryRun": true}, 200, &a)
		return a.skipped(to.name) == ""
	}
	bothReach := func(step string) {
		t.Helper()
		if !reaches(fra1, nyc1) || !reaches(nyc1, fra1) {
			t.Fatalf("%s: a pod's call was refused by the other", step)
		}
	}
	// takes says whether p takes a call signed with secret.
	takes := func(p *fedPod, secret string) bool {
		t.Helper()
		req, _ := http.NewRequest("GET", p.url+federation.LoadsPath, nil)
		for k, v := range federation.SignTo([]byte(secret), "GET", federation.LoadsPath, "nyc1", p.name, nil, time.Now()) {
			req.Header.Set(k, v)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode == 200
	}
	const read = "SIGHUP: federation secrets read"

	bothReach("before")
	if takes(fra1, newSecret) {
		t.Fatal("fra1 took the new secret before it was given it")
	}
	// 1. The new secret second, pod by pod: each signs with the old one
	// and takes both.
	for _, p := range pods {
		write(p.name, oldSecret, newSecret)
		hup(p, read)
		bothReach("new secret added to " + p.name)
	}
	if !takes(fra1, newSecret) || !takes(fra1, oldSecret) {
		t.Fatal("fra1 does not take both secrets after step 1")
	}
	// 2. The new secret first, pod by pod: a pod that signs with it is
	// taken by one that still signs with the old.
	for _, p := range pods {
		write(p.name, newSecret, oldSecret)
		hup(p, read)
		bothReach("new secret first on " + p.name)
	}
	// 3. The old one dropped, pod by pod.
	for _, p := range pods {
		write(p.name, newSecret)
		hup(p, read)
		bothReach("old secret dropped on " + p.name)
	}
	if takes(fra1, oldSecret) || !takes(fra1, newSecret) {
		t.Fatal("fra1 still takes the old secret, or not the new one, after step 3")
	}

	// A file that does not read is not taken: the secrets in force stay.
	write("fra1", "short")
	hup(fra1, "SIGHUP: federation secrets kept")
	if !takes(fra1, newSecret) {
		t.Fatal("a secret file that did not read replaced fra1's secrets")
	}
	bothReach("after a bad file")

	// A pod left on another secret: it signs with it, and takes no other.
	write("fra1", "another-federation-secret-000000")
	hup(fra1, read)
	if reaches(fra1, nyc1) {
		t.Error("nyc1 took fra1's call signed with a secret nyc1 does not hold")
	}
	if takes(fra1, newSecret) {
		t.Error("fra1 took a call signed with a secret it dropped")
	}
}
