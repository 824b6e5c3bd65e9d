//go:build linux

// Package faildisk gives a test a disk that fails: an ext4 file system on
// a loop device, mounted with errors=remount-ro, whose failure the test
// triggers through the kernel's own error path
// (/sys/fs/ext4/<dev>/trigger_fs_error). The file system goes emergency
// read-only, files already open included, as when the kernel meets a
// failing disk's I/O error: every write fails with EROFS.
//
// Nothing simpler makes a directory read-only under a process that holds
// files open in it: root ignores permissions, and `mount -o remount,ro`
// is refused (EBUSY) while files are open for writing. The failure is
// for good while the file system is mounted (the kernel refuses
// `mount -o remount,rw` after an emergency read-only), so Repair is what
// an administrator does: unmount, e2fsck, mount again. Its users must
// close their files first.
//
// It needs root, a loop device, e2fsprogs and a kernel with the trigger;
// New skips the test otherwise.
package faildisk

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Disk is a mounted ext4 file system the test can make fail.
type Disk struct {
	t   testing.TB
	img string // the backing file
	dev string // /dev/loopN
	// Dir is the mount point.
	Dir string
}

// New makes and mounts a 64 MiB ext4 file system, or skips the test when
// this machine cannot. It is unmounted and its loop device detached when
// the test ends, whatever happened; the image goes with the test's temp
// directory.
func New(t testing.TB) *Disk {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("failing disk: needs root to set up a loop device and mount ext4")
	}
	for _, tool := range []string{"losetup", "mkfs.ext4", "e2fsck", "mount", "umount"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("failing disk: %s not found (packages e2fsprogs, mount)", tool)
		}
	}
	d := &Disk{t: t, img: filepath.Join(t.TempDir(), "disk.img"), Dir: t.TempDir()}
	if err := os.WriteFile(d.img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(d.img, 64<<20); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("losetup", "--find", "--show", d.img).CombinedOutput()
	if err != nil {
		t.Skipf("failing disk: no loop device here: %v %s", err, out)
	}
	d.dev = strings.TrimSpace(string(out))
	t.Cleanup(d.cleanup)
	d.run("mkfs.ext4", "-q", d.dev)
	d.mount()
	if _, err := os.Stat(d.trigger()); err != nil {
		t.Skipf("failing disk: this kernel has no ext4 error trigger: %v", err)
	}
	return d
}

func (d *Disk) mount() {
	d.t.Helper()
	d.run("mount", "-t", "ext4", "-o", "errors=remount-ro", d.dev, d.Dir)
}

// trigger is the sysfs file that makes the kernel report an ext4 error.
func (d *Disk) trigger() string {
	return filepath.Join("/sys/fs/ext4", filepath.Base(d.dev), "trigger_fs_error")
}

func (d *Disk) run(name string, args ...string) {
	d.t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		d.t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// Fail makes the file system fail: from now on every write to it fails
// with EROFS, through files already open too.
func (d *Disk) Fail() {
	d.t.Helper()
	if err := os.WriteFile(d.trigger(), []byte("vdibroker test: a failing disk\n"), 0o200); err != nil {
		d.t.Fatalf("trigger the ext4 error: %v", err)
	}
	if err := os.WriteFile(filepath.Join(d.Dir, "after-failure"), nil, 0o600); !errors.Is(err, syscall.EROFS) {
		d.t.Fatalf("a write after the ext4 error: %v, want EROFS", err)
	}
}

// Repair unmounts the file system (its users must have closed their
// files), checks it (e2fsck replays the journal and fixes what the error
// left; exit status 1 says it corrected something) and mounts it
// read-write again.
//
// A mount namespace another process made while the disk was mounted (a
// concurrent test's `ip netns exec` or `unshare --mount`) holds a copy of
// the mount, and with it the loop device, after this namespace's unmount:
// e2fsck then refuses the device as in use for as long as that process
// lives, minutes for an xrdp in a network namespace. The copy is read-only
// since Fail and writes nothing more, so the image is then checked and
// mounted through a fresh loop device, as an administrator would after
// moving a disk to another controller; the old device is detached when
// the last copy goes.
func (d *Disk) Repair() {
	d.t.Helper()
	d.run("umount", d.Dir)
	out, err := exec.Command("e2fsck", "-fy", d.dev).CombinedOutput()
	if err != nil && strings.Contains(string(out), "is in use") {
		d.t.Logf("failing disk: %s still held by another mount namespace after the unmount; checking %s through a fresh loop device", d.dev, d.img)
		d.run("losetup", "-d", d.dev) // deferred until the copy goes
		d.dev = ""
		dev, lerr := exec.Command("losetup", "--find", "--show", d.img).CombinedOutput()
		if lerr != nil {
			d.t.Fatalf("losetup --find --show %s: %v %s", d.img, lerr, dev)
		}
		d.dev = strings.TrimSpace(string(dev))
		out, err = exec.Command("e2fsck", "-fy", d.dev).CombinedOutput()
	}
	var ee *exec.ExitError
	if err != nil && (!errors.As(err, &ee) || ee.ExitCode() > 1) {
		d.t.Fatalf("e2fsck -fy %s: %v (uncorrected errors)\n%s", d.dev, err, out)
	}
	d.mount()
}

// cleanup unmounts (lazily when something still holds it, so a failed
// test leaves no mount behind) and detaches the loop device.
func (d *Disk) cleanup() {
	if err := syscall.Unmount(d.Dir, 0); err != nil && err != syscall.EINVAL {
		if err := syscall.Unmount(d.Dir, syscall.MNT_DETACH); err != nil && err != syscall.EINVAL {
			d.t.Errorf("unmount %s: %v", d.Dir, err)
		}
	}
	if d.dev == "" {
		return // Repair detached it and could not attach another
	}
	if out, err := exec.Command("losetup", "-d", d.dev).CombinedOutput(); err != nil {
		d.t.Errorf("losetup -d %s: %v %s", d.dev, err, out)
	}
}
