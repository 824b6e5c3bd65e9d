//go:build unix

package main

// The "hypervisor" of the power end-to-end tests (power_e2e_test.go,
// autoscale_e2e_test.go): an exec power driver named lab whose start
// launches a real `vdibroker agent` for the host and whose stop SIGTERMs
// it, through scripts the test writes (the driver runs them as programs,
// without a shell of its own).

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/vdibroker/vdibroker"
)

// e2eLab is the lab driver's config and scripts. Each host's agent reads
// its sessions from WORK/HOST.sessions.json (the file provider: Logoff
// removes the entry, SendMessage appends to WORK/HOST.sessions.json.messages)
// and registers with the token of its pool (WORK/POOL.token).
type e2eLab struct {
	tb                         testing.TB
	work, cfg                  string
	start, stop, status, agent string
}

// e2eNewLab writes the power config naming the lab driver under dir; the
// scripts come once the broker's URL is known (install).
func e2eNewLab(tb testing.TB, dir string) *e2eLab {
	tb.Helper()
	l := &e2eLab{tb: tb, work: filepath.Join(dir, "vms"), cfg: filepath.Join(dir, "power.yaml"),
		start: filepath.Join(dir, "vm-start"), stop: filepath.Join(dir, "vm-stop"), status: filepath.Join(dir, "vm-status")}
	if err := os.MkdirAll(l.work, 0o755); err != nil {
		tb.Fatal(err)
	}
	err := os.WriteFile(l.cfg, []byte(fmt.Sprintf(`drivers:
  - name: lab
    type: exec
    start: [%q, "{host}", "{pool}"]
    stop: [%q, "{host}"]
    status: [%q, "{host}"]
    timeout: 30s
`, l.start, l.stop, l.status)), 0o600)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(l.killAll) // agents left running by a failed test or by the last stop
	return l
}

// install writes the scripts: start runs an agent of bin for the host
// against base in the background (its output to a file, so the action
// returns), stop SIGTERMs it and waits for it to exit, status asks
// whether it runs (exit 0 running, 3 stopped).
func (l *e2eLab) install(bin, base string) {
	l.tb.Helper()
	e2eScript(l.tb, l.start, fmt.Sprintf(`W=%q
echo "start $1 $2" >> "$W/actions.log"
%q agent --server %q --registration-token "$(cat "$W/$2.token")" --host-name "$1" --address 127.0.0.1:3389 \
  --state-dir "$W/$1" --heartbeat-interval 1s --sessions-provider "file:$W/$1.sessions.json" > "$W/$1.log" 2>&1 &
echo $! > "$W/$1.pid"
`, l.work, bin, base))
	e2eScript(l.tb, l.stop, fmt.Sprintf(`W=%q
echo "stop $1" >> "$W/actions.log"
[ -f "$W/$1.pid" ] || exit 0
pid=$(cat "$W/$1.pid")
kill -TERM "$pid"
i=0
while kill -0 "$pid" 2>/dev/null && [ $i -lt 200 ]; do sleep 0.1; i=$((i+1)); done
rm -f "$W/$1.pid"
`, l.work))
	e2eScript(l.tb, l.status, fmt.Sprintf(`W=%q
[ -f "$W/$1.pid" ] && kill -0 "$(cat "$W/$1.pid")" 2>/dev/null && exit 0
exit 3
`, l.work))
}

// token stores the registration token the pool's agents register with.
func (l *e2eLab) token(pool, token string) {
	l.tb.Helper()
	if err := os.WriteFile(filepath.Join(l.work, pool+".token"), []byte(token), 0o600); err != nil {
		l.tb.Fatal(err)
	}
}

// sessions sets the sessions the host's agent reports (R-S2).
func (l *e2eLab) sessions(host string, list []vdibroker.AgentSession) {
	l.tb.Helper()
	e2eWriteSessions(l.tb, filepath.Join(l.work, host+".sessions.json"), list)
}

// readSessions reads what the host's agent reports now (Logoff removes).
func (l *e2eLab) readSessions(host string) string {
	b, _ := os.ReadFile(filepath.Join(l.work, host+".sessions.json"))
	return string(b)
}

// messages is what the host's agent was told to show (SendMessage).
func (l *e2eLab) messages(host string) string {
	b, _ := os.ReadFile(filepath.Join(l.work, host+".sessions.json.messages"))
	return string(b)
}

// actions is the driver's log: "start HOST POOL" and "stop HOST" lines.
func (l *e2eLab) actions() string {
	b, _ := os.ReadFile(filepath.Join(l.work, "actions.log"))
	return string(b)
}

// pid is the host's agent process (0 when the lab runs none).
func (l *e2eLab) pid(host string) int {
	b, err := os.ReadFile(filepath.Join(l.work, host+".pid"))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// gone reports whether the process pid has exited. Reaped by init once
// the start script's shell is gone; a zombie answers signal 0 too, so its
// state is read.
func e2eGone(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return true
	}
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return err == nil && strings.Contains(string(st), ") Z ")
}

func (l *e2eLab) killAll() {
	files, _ := filepath.Glob(filepath.Join(l.work, "*.pid"))
	for _, f := range files {
		if pid := l.pid(strings.TrimSuffix(filepath.Base(f), ".pid")); pid > 0 {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}
