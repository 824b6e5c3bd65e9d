package federation

import (
	"fmt"
	"testing"

	"github.com/vdibroker/vdibroker"
)

// R-G1: every user has one directory pod, the same whatever the order of
// the document's pods, spread over the pods, and a pod added moves only
// the users it takes.
func TestDirectoryPod_RG1(t *testing.T) {
	doc := &vdibroker.Federation{}
	for i := range 10 {
		doc.Pods = append(doc.Pods, vdibroker.Pod{Name: fmt.Sprintf("pod%02d", i)})
	}
	rev := &vdibroker.Federation{}
	for i := len(doc.Pods) - 1; i >= 0; i-- {
		rev.Pods = append(rev.Pods, doc.Pods[i])
	}
	grown := &vdibroker.Federation{Pods: append(append([]vdibroker.Pod{}, doc.Pods...), vdibroker.Pod{Name: "pod10"})}
	per := map[string]int{}
	moved := 0
	const users = 5000
	for i := range users {
		u := fmt.Sprintf("user%d@example.com", i)
		d := DirectoryPod(doc, u)
		if d == "" || d != DirectoryPod(rev, u) {
			t.Fatalf("user %s: directory pod %q, reversed document %q", u, d, DirectoryPod(rev, u))
		}
		per[d]++
		if g := DirectoryPod(grown, u); g != d {
			if g != "pod10" {
				t.Fatalf("user %s moved from %s to %s when pod10 was added", u, d, g)
			}
			moved++
		}
	}
	if len(per) != 10 {
		t.Fatalf("users on %d pods, want all 10: %v", len(per), per)
	}
	for p, n := range per {
		if n < users/10/2 || n > users/10*2 {
			t.Errorf("pod %s is the directory pod of %d users of %d: not spread", p, n, users)
		}
	}
	if moved < users/11/2 || moved > users/11*2 {
		t.Errorf("%d users moved to the added pod, want about %d", moved, users/11)
	}
	if DirectoryPod(&vdibroker.Federation{}, "u") != "" {
		t.Error("a document without pods has a directory pod")
	}
}
