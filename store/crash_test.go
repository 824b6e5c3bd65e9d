package store_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"testing"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/store"
)

// crashChildEnv makes the test binary act as the child of TestCrashDurability.
const crashChildEnv = "VDIBROKER_STORE_CRASH_CHILD_DIR"

// TestCrashDurability is R-D2 on SQLite: a child process commits
// placements from 16 goroutines and prints each id once CommitPlacement has
// returned; the parent SIGKILLs it mid-stream, reopens the database and
// finds every printed session.
func TestCrashDurability(t *testing.T) {
	if dir := os.Getenv(crashChildEnv); dir != "" {
		crashChild(t, dir)
		return
	}
	dir := t.TempDir()
	{
		st, err := store.Open(t.Context(), "", dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		db := st.(*store.DB)
		mustPool(t, db, pool("pool1", vdibroker.Pooled))
		mustHost(t, db, "pool1", "h1")
		st.Close()
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashDurability$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var acked []string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		if len(line) > 4 && line[:4] == "ack " {
			acked = append(acked, line[4:])
		}
		if len(acked) == 300 {
			break
		}
	}
	// SIGKILL: no deferred function, no Close, no flush.
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if len(acked) < 300 {
		t.Fatalf("child acknowledged only %d placements before it stopped", len(acked))
	}

	st, err := store.Open(t.Context(), "", dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, id := range acked {
		if _, err := st.GetUserSession(t.Context(), "pool1", id); err != nil {
			t.Errorf("acknowledged session %s lost: %v", id, err)
		}
	}
	bad, err := st.(*store.DB).CheckCounts(t.Context())
	if err != nil || len(bad) > 0 {
		t.Errorf("counts after crash: %v %v", bad, err)
	}
}

// crashChild commits placements until it is killed.
func crashChild(t *testing.T, dir string) {
	st, err := store.Open(t.Context(), "", dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	w := bufio.NewWriter(os.Stdout)
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := 0; ; i++ {
				c := placement("pool1", "h1", fmt.Sprintf("u%d-%d", g, i), vdibroker.NoSessionLimit)
				if err := st.CommitPlacement(t.Context(), c); err != nil {
					fmt.Fprintln(os.Stderr, "commit:", err)
					return
				}
				mu.Lock()
				fmt.Fprintln(w, "ack", c.Session.ID)
				w.Flush()
				mu.Unlock()
			}
		})
	}
	wg.Wait()
}
