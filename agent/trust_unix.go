//go:build unix

package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// maxLinks is how many links fileTrusted follows on the way to a file,
// Linux's MAXSYMLINKS.
const maxLinks = 40

// fileTrusted reports why the file at path must not be trusted by the
// agent (root): it, or a directory on the way to it, belongs to another
// user or may be written by its group or others, who could then change
// what it holds (R-SEC). As sshd's StrictModes: owned by root or the
// agent's user, no group or other write, but for sticky directories
// (/tmp), where no one replaces another's file. The way is walked as the
// kernel resolves it, entry by entry: every directory it goes through,
// and every link it follows, which must belong to root or the agent's
// user too (in a sticky directory its owner may point it elsewhere),
// wherever it leads. A file that cannot be found is not refused: reading
// or running it reports that. file is the file checked, nil when none was
// found.
func fileTrusted(path string) (file os.FileInfo, err error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, nil
	}
	fi, err := os.Lstat("/")
	if err != nil {
		return nil, err
	}
	if err := safeOwner("/", fi); err != nil {
		return nil, err
	}
	dir, rest, links := "/", strings.Split(abs, "/"), 0
	for len(rest) > 0 {
		name := rest[0]
		rest = rest[1:]
		switch name {
		case "", ".":
			continue
		case "..":
			dir = filepath.Dir(dir) // dir holds no link: the kernel's ".." too
			continue
		}
		entry := filepath.Join(dir, name)
		fi, err := os.Lstat(entry)
		if err != nil {
			return nil, nil
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			if err := linkOwner(entry, fi); err != nil {
				return nil, err
			}
			if links++; links > maxLinks {
				return nil, nil
			}
			to, err := os.Readlink(entry)
			if err != nil {
				return nil, nil
			}
			if filepath.IsAbs(to) {
				dir = "/"
			}
			rest = append(strings.Split(to, "/"), rest...)
			continue
		}
		if err := safeOwner(entry, fi); err != nil {
			return nil, err
		}
		dir, file = entry, fi
	}
	return file, nil
}

func safeOwner(name string, fi os.FileInfo) error {
	if err := linkOwner(name, fi); err != nil {
		return err
	}
	if fi.Mode().Perm()&0o022 != 0 && !(fi.IsDir() && fi.Mode()&os.ModeSticky != 0) {
		return fmt.Errorf("%s may be written by its group or others (mode %v)", name, fi.Mode().Perm())
	}
	return nil
}

// linkOwner is safeOwner's owner half, all that counts for a link, whose
// mode is no one's to use.
func linkOwner(name string, fi os.FileInfo) error {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid != 0 && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("%s belongs to uid %d, neither root nor the agent's user", name, st.Uid)
	}
	return nil
}
