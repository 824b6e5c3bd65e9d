package faildisk_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker/internal/faildisk"
)

// TestRepairWhileAnotherNamespaceHoldsTheDisk (R-OUT1): a process that
// made a mount namespace of its own while the disk was mounted (another
// test package's `ip netns exec` or `unshare --mount`, run at the same
// time) still holds the failed file system after Repair's unmount, and
// e2fsck refuses the loop device as in use. Repair still checks and
// mounts the disk, and what was written before the failure is there.
func TestRepairWhileAnotherNamespaceHoldsTheDisk(t *testing.T) {
	disk := faildisk.New(t)
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("failing disk: unshare not found (package util-linux)")
	}
	before := filepath.Join(disk.Dir, "before")
	// Written and synced as a commit is: the file, then its entry.
	for _, name := range []string{before, disk.Dir} {
		f, err := os.OpenFile(name, os.O_RDONLY, 0)
		if name == before {
			f, err = os.Create(name)
			if err == nil {
				_, err = f.WriteString("committed")
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	holder := exec.Command("unshare", "--mount", "sleep", "120")
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holder.Process.Kill(); holder.Wait() })
	// The copy exists once unshare has exec'd sleep: wait for that.
	for i := 0; ; i++ {
		exe, _ := os.Readlink("/proc/" + strconv.Itoa(holder.Process.Pid) + "/exe")
		if filepath.Base(exe) == "sleep" {
			break
		}
		if i == 2000 { // 10 s
			t.Fatalf("unshare did not start sleep: %q", exe)
		}
		time.Sleep(5 * time.Millisecond)
	}
	disk.Fail()
	disk.Repair()
	got, err := os.ReadFile(before)
	if err != nil || string(got) != "committed" {
		t.Fatalf("file written before the failure, after the repair: %q, %v", got, err)
	}
	if err := os.WriteFile(filepath.Join(disk.Dir, "after"), []byte("x"), 0o600); err != nil {
		t.Fatalf("write after the repair: %v", err)
	}
}
