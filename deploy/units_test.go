package deploy_test

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker/deploy"
	"github.com/vdibroker/vdibroker/internal/syncbuf"
)

// build builds the vdibroker binary into dir/bin/vdibroker.
func build(t *testing.T, dir string) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not found; the test builds vdibroker")
	}
	bin := filepath.Join(dir, "bin", "vdibroker")
	if out, err := exec.Command(goBin, "build", "-o", bin, "../cmd/vdibroker").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func file(t *testing.T, name string) string {
	t.Helper()
	b, err := deploy.Files.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestUnitsVerify: systemd-analyze verify finds nothing to say about
// any unit: no unknown key, no bad value, the commands executable. The
// binary the units start, /usr/local/bin/vdibroker, is the one just built,
// bound there in a mount namespace of the test's own (unshare, as root),
// so the machine's /usr/local/bin is not touched.
func TestUnitsVerify(t *testing.T) {
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Skip("systemd-analyze not found (Debian package systemd): units not verified")
	}
	if os.Geteuid() != 0 {
		t.Skip("not root: the test binds the built binary at /usr/local/bin/vdibroker in a mount namespace, which needs root")
	}
	dir := t.TempDir()
	bin := build(t, dir)
	for _, unit := range []string{"vdibroker.service", "vdibroker-agent.service", "vdibroker-gateway.service"} {
		t.Run(unit, func(t *testing.T) {
			path := filepath.Join(dir, unit)
			if err := os.WriteFile(path, []byte(file(t, unit)), 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("unshare", "--mount", "sh", "-c", `mount --bind "$1" /usr/local/bin && exec systemd-analyze verify --man=no "$2"`, "sh", filepath.Dir(bin), path)
			out, err := cmd.CombinedOutput()
			if err != nil || len(bytes.TrimSpace(out)) > 0 {
				t.Errorf("systemd-analyze verify %s: %v\n%s", unit, err, out)
			}
		})
	}
}

// execStart returns the environment the unit sets itself (its
// Environment= lines, %S, the state directories' root, as stateRoot) and
// the arguments of its ExecStart after the binary, with ${STATE_DIRECTORY}
// as stateRoot/<the unit's StateDirectory=> and unset $VARS dropped (as
// systemd does with a variable the environment lacks). systemd gives a
// service Environment= first and the EnvironmentFile's variables after,
// which win: put the file's after env in the process's environment
// (os/exec takes the last value of a name given twice).
func execStart(t *testing.T, unit, stateRoot string) (env, args []string) {
	t.Helper()
	text := strings.ReplaceAll(file(t, unit), "\\\n", " ")
	stateDir := stateRoot
	if m := regexp.MustCompile(`(?m)^StateDirectory=(\S+)$`).FindStringSubmatch(text); m != nil {
		stateDir = filepath.Join(stateRoot, m[1])
	}
	var cmdline string
	found := false
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, "Environment="); ok {
			if strings.ContainsAny(v, `"' `) {
				t.Fatalf("%s: Environment=%s: quoted or several, which this test does not read", unit, v)
			}
			env = append(env, strings.ReplaceAll(v, "%S", stateRoot))
		}
		if v, ok := strings.CutPrefix(line, "ExecStart="); ok {
			cmdline, found = v, true
		}
	}
	if !found {
		t.Fatalf("%s has no ExecStart", unit)
	}
	for i, f := range strings.Fields(cmdline) {
		switch {
		case i == 0:
			if f != "/usr/local/bin/vdibroker" {
				t.Fatalf("%s starts %s", unit, f)
			}
		case strings.HasPrefix(f, "$") && !strings.HasPrefix(f, "${"):
			// An extra-flags variable, not set here.
		default:
			args = append(args, strings.ReplaceAll(f, "${STATE_DIRECTORY}", stateDir))
		}
	}
	return env, args
}

var setting = regexp.MustCompile(`(?m)^#?(VDIBROKER_[A-Z_]+)=(.*)$`)

// settings returns the environment file's lines that are set (not
// commented out), and the names of all, set or not.
func settings(t *testing.T, name string) (set map[string]string, all []string) {
	t.Helper()
	set = map[string]string{}
	for _, m := range setting.FindAllStringSubmatch(file(t, name), -1) {
		all = append(all, m[1])
		if !strings.HasPrefix(m[0], "#") {
			set[m[1]] = m[2]
		}
	}
	return set, all
}

// flagOf is the flag of an environment variable (VDIBROKER_TLS_CERT is
// --tls-cert).
func flagOf(env string) string {
	return "--" + strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(env, "VDIBROKER_"), "_", "-"))
}

// TestEnvironmentFilesNameRealFlags: every setting the environment files
// show, set or commented out, is a flag of the program the unit starts
// (serve, agent, gateway), so the examples cannot drift from the program.
func TestEnvironmentFilesNameRealFlags(t *testing.T) {
	bin := build(t, t.TempDir())
	for envFile, command := range map[string]string{"broker.env": "serve", "agent.env": "agent", "gateway.env": "gateway"} {
		help, err := exec.Command(bin, command, "--help").CombinedOutput()
		if err != nil {
			t.Fatalf("%s --help: %v", command, err)
		}
		_, all := settings(t, envFile)
		if len(all) < 5 {
			t.Fatalf("%s shows %d settings", envFile, len(all))
		}
		for _, name := range all {
			if name == "VDIBROKER_ADMIN_TOKEN" { // serve's own variable, not a flag
				continue
			}
			if !strings.Contains(string(help), flagOf(name)+" ") {
				t.Errorf("%s: %s, but %s has no %s", envFile, name, command, flagOf(name))
			}
		}
	}
}

// TestUnitsStartAsDocumented: the broker started as its unit starts it,
// with broker.env as shipped (every line optional, none set) and only a
// listen address of the test's own, serves without TLS files; the agent
// started as its unit starts it, with agent.env's two settings filled in
// and nothing else (no CA, no client certificate), registers its host.
// The gateway started as its unit starts it, with gateway.env's five
// settings pointed at the test's certificate, token file and broker, reads
// the broker's keys, serves its certificate and has its token taken. That
// is the install of docs/operations.md, docs/agent.md and docs/gateway.md
// on loopback.
func TestUnitsStartAsDocumented(t *testing.T) {
	dir := t.TempDir()
	bin := build(t, dir)
	set, _ := settings(t, "broker.env")
	if len(set) != 0 {
		t.Fatalf("broker.env sets %v: the shipped file must set nothing (every setting optional)", set)
	}
	const admin = "vdb_admin_units_test_0123456789abcdef"
	stateRoot := filepath.Join(dir, "var-lib") // %S, /var/lib
	unitEnv, args := execStart(t, "vdibroker.service", stateRoot)
	env := append(unitEnv, "VDIBROKER_LISTEN=127.0.0.1:0", "VDIBROKER_ADMIN_TOKEN="+admin)
	base := start(t, bin, env, args, "vdibroker listening on ")
	if !strings.HasPrefix(base, "http://127.0.0.1:") {
		t.Fatalf("broker at %q", base)
	}
	if _, err := os.Stat(filepath.Join(stateRoot, "vdibroker", "vdibroker.db")); err != nil {
		t.Errorf("the broker's store is not in its state directory: %v", err)
	}
	call := adminAPI(t, base, admin)
	tok := unitsPoolToken(t, call)

	agentSet, _ := settings(t, "agent.env")
	if len(agentSet) != 2 || agentSet["VDIBROKER_SERVER"] == "" || agentSet["VDIBROKER_REGISTRATION_TOKEN"] != "" {
		t.Fatalf("agent.env sets %v: want only the server and an empty token to fill in", agentSet)
	}
	agentEnv := []string{"VDIBROKER_SERVER=" + base, "VDIBROKER_REGISTRATION_TOKEN=" + tok.Token,
		"VDIBROKER_HOST_NAME=units-host", "VDIBROKER_HEARTBEAT_INTERVAL=1s", "VDIBROKER_SESSIONS_PROVIDER=none"}
	agentUnitEnv, agentArgs := execStart(t, "vdibroker-agent.service", stateRoot)
	start(t, bin, append(agentUnitEnv, agentEnv...), agentArgs, "")
	deadline := time.Now().Add(30 * time.Second)
	for {
		var h struct {
			Status string `json:"status"`
		}
		req, _ := http.NewRequest("GET", base+"/api/v1/hostpools/units-pool/sessionhosts/units-host", nil)
		req.Header.Set("Authorization", "Bearer "+admin)
		if res, err := http.DefaultClient.Do(req); err == nil {
			json.NewDecoder(res.Body).Decode(&h)
			res.Body.Close()
		}
		if h.Status == "Available" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agent's host is %q after 30 s, want Available", h.Status)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := os.Stat(filepath.Join(stateRoot, "vdibroker-agent", "credential.json")); err != nil {
		t.Errorf("the agent kept no credential in its state directory: %v", err)
	}

	// The gateway, with gateway.env's five settings pointed at the test's
	// files and broker, and a listen address of the test's own.
	gwSet, _ := settings(t, "gateway.env")
	needed := []string{"VDIBROKER_TLS_CERT", "VDIBROKER_TLS_KEY", "VDIBROKER_KEYS_URL", "VDIBROKER_BROKER_URL", "VDIBROKER_BROKER_TOKEN_FILE"}
	if len(gwSet) != len(needed) {
		t.Fatalf("gateway.env sets %v, want only %v", gwSet, needed)
	}
	etc := filepath.Join(dir, "etc-gateway")
	if err := os.Mkdir(etc, 0o750); err != nil {
		t.Fatal(err)
	}
	local := strings.NewReplacer("/etc/vdibroker-gateway", etc, "https://broker.example.com:8443", base)
	gwEnv := []string{"VDIBROKER_LISTEN=127.0.0.1:0"}
	for _, name := range needed {
		if gwSet[name] == "" {
			t.Fatalf("gateway.env leaves %s empty", name)
		}
		gwSet[name] = local.Replace(gwSet[name])
		gwEnv = append(gwEnv, name+"="+gwSet[name])
	}
	gwCert := selfSigned(t, gwSet["VDIBROKER_TLS_CERT"], gwSet["VDIBROKER_TLS_KEY"])
	var gwTok struct {
		Token string `json:"token"`
	}
	call("POST", "/tokens", `{"role": "Gateway", "subject": "units-rdgw"}`, &gwTok)
	if err := os.WriteFile(gwSet["VDIBROKER_BROKER_TOKEN_FILE"], []byte(gwTok.Token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	gwUnitEnv, gwArgs := execStart(t, "vdibroker-gateway.service", stateRoot)
	gwAddr, gwLog := startLogged(t, bin, append(gwUnitEnv, gwEnv...), gwArgs, "vdibroker gateway listening on ")
	// It serves only once it has read the broker's keys: it has, and it
	// serves the certificate of the file, with TLS.
	roots := x509.NewCertPool()
	roots.AddCert(gwCert)
	conn, err := tls.Dial("tcp", gwAddr, &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"})
	if err != nil {
		t.Fatalf("TLS to the gateway: %v", err)
	}
	conn.Close()
	// The broker takes the token of the file (the gateway's check of it at
	// start, within 5 s).
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(gwLog.String(), "broker takes this gateway's reports"); {
		if time.Now().After(deadline) {
			t.Fatalf("the gateway did not log that the broker takes its reports:\n%s", gwLog.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestUnitsTakeDirectoryFromEnvironmentFile: a data directory set in
// broker.env (VDIBROKER_DATA_DIR), and an agent's state directory in
// agent.env (VDIBROKER_STATE_DIR), are where the programs started as
// their units start them keep their files: the file's variables come
// after the unit's own, as systemd gives them, and the command line
// names no directory, which would win over both and leave the file's
// setting unread (docs/operations.md tells how to move the data
// directory).
func TestUnitsTakeDirectoryFromEnvironmentFile(t *testing.T) {
	dir := t.TempDir()
	bin := build(t, dir)
	stateRoot := filepath.Join(dir, "var-lib") // %S, /var/lib
	dataDir, agentDir := filepath.Join(dir, "srv", "vdibroker"), filepath.Join(dir, "srv", "vdibroker-agent")

	unitEnv, args := execStart(t, "vdibroker.service", stateRoot)
	base := start(t, bin, append(unitEnv, "VDIBROKER_LISTEN=127.0.0.1:0", "VDIBROKER_DATA_DIR="+dataDir), args, "vdibroker listening on ")
	admin, err := os.ReadFile(filepath.Join(dataDir, "admin.token"))
	if err != nil {
		t.Fatalf("VDIBROKER_DATA_DIR=%s in broker.env, but no admin token there (the unit's command line: %v): %v", dataDir, args, err)
	}
	tok := unitsPoolToken(t, adminAPI(t, base, strings.TrimSpace(string(admin))))

	agentUnitEnv, agentArgs := execStart(t, "vdibroker-agent.service", stateRoot)
	start(t, bin, append(agentUnitEnv, "VDIBROKER_SERVER="+base, "VDIBROKER_REGISTRATION_TOKEN="+tok.Token,
		"VDIBROKER_HOST_NAME=units-host", "VDIBROKER_HEARTBEAT_INTERVAL=1s", "VDIBROKER_SESSIONS_PROVIDER=none",
		"VDIBROKER_STATE_DIR="+agentDir), agentArgs, "")
	credential := filepath.Join(agentDir, "credential.json")
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if _, err := os.Stat(credential); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("VDIBROKER_STATE_DIR=%s in agent.env, but no credential there after 30 s (the unit's command line: %v)", agentDir, agentArgs)
		}
	}
	for _, d := range []string{"vdibroker", "vdibroker-agent"} {
		if entries, _ := os.ReadDir(filepath.Join(stateRoot, d)); len(entries) > 0 {
			t.Errorf("%s holds %d files, where the environment file named another directory", filepath.Join(stateRoot, d), len(entries))
		}
	}
}

// selfSigned writes a self-signed certificate for 127.0.0.1 and its key
// to certFile and keyFile, and returns the certificate.
func selfSigned(t *testing.T, certFile, keyFile string) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	for file, block := range map[string]*pem.Block{certFile: {Type: "CERTIFICATE", Bytes: der}, keyFile: {Type: "EC PRIVATE KEY", Bytes: kder}} {
		if err := os.WriteFile(file, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// start runs bin with args in a clean environment plus env (as systemd
// gives a service only its unit's and file's variables), stopped when the
// test ends. With a prefix, it waits for a line of stdout starting with
// it and returns the rest.
func start(t *testing.T, bin string, env, args []string, prefix string) string {
	t.Helper()
	rest, _ := startLogged(t, bin, env, args, prefix)
	return rest
}

// startLogged is start, returning the program's stderr (its log) too.
func startLogged(t *testing.T, bin string, env, args []string, prefix string) (string, *syncbuf.Buffer) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, env...)
	stderr := new(syncbuf.Buffer)
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("%s %s:\n%s", filepath.Base(bin), args[0], stderr.String())
		}
	})
	lines := make(chan string, 16)
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
		cmd.Wait()
	}()
	if prefix == "" {
		return "", stderr
	}
	timeout := time.After(60 * time.Second)
	for {
		select {
		case l := <-lines:
			if rest, ok := strings.CutPrefix(l, prefix); ok {
				return rest, stderr
			}
		case <-done:
			t.Fatalf("%s exited before it printed %q", args[0], prefix)
		case <-timeout:
			t.Fatalf("%s printed no %q", args[0], prefix)
		}
	}
}

// TestUnitsDoNotRestartOnUsageErrors: every unit restarts on failure but
// not on exit status 2, which each command gives for a mistake in its
// settings (an unknown flag, a VDIBROKER_* value that does not parse):
// restarting cannot mend it, and a unit restarting every few seconds
// hides the error among its own starts. The built binary is asked that
// each command the units start does exit 2 for such a mistake.
func TestUnitsDoNotRestartOnUsageErrors(t *testing.T) {
	bin := build(t, t.TempDir())
	for unit, command := range map[string]string{"vdibroker.service": "serve", "vdibroker-agent.service": "agent", "vdibroker-gateway.service": "gateway"} {
		text := file(t, unit)
		if !regexp.MustCompile(`(?m)^Restart=on-failure$`).MatchString(text) {
			t.Errorf("%s does not restart on failure", unit)
		}
		if !regexp.MustCompile(`(?m)^RestartPreventExitStatus=2$`).MatchString(text) {
			t.Errorf("%s restarts on exit status 2 (a mistake in its settings)", unit)
		}
		err := exec.Command(bin, command, "--no-such-flag").Run()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 {
			t.Errorf("%s --no-such-flag: %v, want exit status 2", command, err)
		}
	}
}

// exposure is what TestUnitsSecurityExposure allows a unit: the highest
// overall exposure systemd-analyze security may give it, and which of its
// checks may report an exposure (nil: any) or must not (hardened).
type exposure struct {
	max      float64
	exposed  []string // json_field names of the checks that may fail
	hardened []string // json_field names of the checks that must pass
}

// unitExposure is each unit's, as systemd 252 (Debian 12) scores the
// units of this directory, rounded up by 0.1 or 0.2. The broker's and the
// gateway's checks may fail only where a network daemon has to (its
// network, its sockets, the host's file system) or where the unit says
// why not (ProcSubset=pid, the gateway's capability and PrivateUsers=):
// any directive taken out fails the test, however little it moves the
// score. The agent's sandbox is light on purpose (the unit says why):
// what it has must stay.
var unitExposure = map[string]exposure{
	"vdibroker.service": {max: 1.2, exposed: []string{
		"DeviceAllow", // ProtectClock's char-rtc, within PrivateDevices
		"IPAddressDeny", "PrivateNetwork", "RestrictAddressFamilies_AF_INET_INET6", "RestrictAddressFamilies_AF_UNIX",
		"ProcSubset", "RootDirectoryOrRootImage",
	}},
	"vdibroker-gateway.service": {max: 1.5, exposed: []string{
		"AmbientCapabilities", "CapabilityBoundingSet_CAP_NET_BIND_SERVICE_BROADCAST_RAW)", "PrivateUsers", // port 443
		"DeviceAllow",
		"IPAddressDeny", "PrivateNetwork", "RestrictAddressFamilies_AF_INET_INET6", "RestrictAddressFamilies_AF_UNIX",
		"ProcSubset", "RootDirectoryOrRootImage",
	}},
	"vdibroker-agent.service": {max: 7.9, hardened: []string{
		"NoNewPrivileges", "PrivateTmp", "ProtectKernelTunables", "ProtectKernelModules", "ProtectKernelLogs",
		"ProtectControlGroups", "RestrictRealtime", "RestrictSUIDSGID", "LockPersonality",
	}},
}

var overallExposure = regexp.MustCompile(`Overall exposure level for \S+: (\d+\.\d+)`)

// TestUnitsSecurityExposure: systemd-analyze security, offline (on the
// unit file, as systemd would run it), scores each unit no higher than
// it scores now, and no check of the hardening has come undone: a
// directive removed from the broker's or the gateway's unit shows up as a
// check that fails, one removed from the agent's as a hardened check
// that fails.
func TestUnitsSecurityExposure(t *testing.T) {
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Skip("systemd-analyze not found (Debian package systemd): exposure not checked")
	}
	dir := t.TempDir()
	for unit, want := range unitExposure {
		t.Run(unit, func(t *testing.T) {
			path := filepath.Join(dir, unit)
			if err := os.WriteFile(path, []byte(file(t, unit)), 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command("systemd-analyze", "security", "--offline=true", "--no-pager", path).CombinedOutput()
			if err != nil && bytes.Contains(out, []byte("offline")) && !overallExposure.Match(out) {
				t.Skipf("systemd-analyze security has no offline mode (systemd 252 or later): %s", bytes.TrimSpace(out))
			}
			m := overallExposure.FindSubmatch(out)
			if m == nil {
				t.Fatalf("systemd-analyze security %s: %v, no overall exposure in:\n%s", unit, err, out)
			}
			var score float64
			if _, err := fmt.Sscan(string(m[1]), &score); err != nil {
				t.Fatal(err)
			}
			if score > want.max {
				t.Errorf("%s: exposure %.1f, want at most %.1f:\n%s", unit, score, want.max, out)
			}

			js, err := exec.Command("systemd-analyze", "security", "--offline=true", "--json=short", path).Output()
			if err != nil {
				t.Fatalf("systemd-analyze security --json=short %s: %v", unit, err)
			}
			var checks []struct {
				Field    string  `json:"json_field"`
				Name     string  `json:"name"`
				Exposure *string `json:"exposure"` // "0.1"; null or "0.0" when the check passes
			}
			if err := json.Unmarshal(js, &checks); err != nil {
				t.Fatalf("systemd-analyze security --json=short %s: %v", unit, err)
			}
			passes := map[string]bool{}
			for _, c := range checks {
				passes[c.Field] = c.Exposure == nil || *c.Exposure == "0.0"
				if !passes[c.Field] && want.exposed != nil && !slices.Contains(want.exposed, c.Field) {
					t.Errorf("%s: %s exposes %s, where the unit is hardened", unit, c.Name, *c.Exposure)
				}
			}
			for _, f := range want.hardened {
				if !passes[f] {
					t.Errorf("%s: the check %s fails or is gone, where the unit is hardened", unit, f)
				}
			}
		})
	}
}

// adminAPI calls the broker's API at base with the admin token; an answer
// of 300 or more fails the test, out (when not nil) takes the answer's JSON.
func adminAPI(t *testing.T, base, admin string) func(method, path, body string, out any) {
	return func(method, path, body string, out any) {
		t.Helper()
		req, _ := http.NewRequest(method, base+"/api/v1"+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+admin)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		data, _ := io.ReadAll(res.Body)
		if res.StatusCode >= 300 {
			t.Fatalf("%s %s: %d %s", method, path, res.StatusCode, data)
		}
		if out != nil {
			json.Unmarshal(data, out)
		}
	}
}

// unitsPoolToken makes the pool units-pool through call, and a
// registration token for it.
func unitsPoolToken(t *testing.T, call func(method, path, body string, out any)) (tok struct {
	Token string `json:"token"`
}) {
	t.Helper()
	call("PUT", "/hostpools/units-pool", `{}`, nil)
	call("POST", "/hostpools/units-pool/registrationtoken", `{"expiresInSeconds": 3600}`, &tok)
	return tok
}
