package federation

import (
	"hash/fnv"

	"github.com/vdibroker/vdibroker"
)

// DirectoryPod is the directory pod of user (a folded name, R-E5) in doc:
// the pod that keeps which pods hold the user's open sessions (R-G1), so a
// global connect asks it instead of every pod in scope. It is the pod
// whose name hashes highest with the user's (rendezvous hashing): every
// pod with the same document picks the same one, and a pod added to or
// removed from the document moves only the users whose pod it is. ""
// when doc lists no pod.
func DirectoryPod(doc *vdibroker.Federation, user string) string {
	best, bestHash := "", uint64(0)
	for _, p := range doc.Pods {
		h := fnv.New64a()
		h.Write([]byte(p.Name))
		h.Write([]byte{0})
		h.Write([]byte(user))
		if v := h.Sum64(); best == "" || v > bestHash || (v == bestHash && p.Name < best) {
			best, bestHash = p.Name, v
		}
	}
	return best
}

// DirectoryMinPods is how many pods a document lists before its pods keep
// a session directory. With fewer, asking every pod in scope for a
// user's sessions (one call to each, in parallel) costs no more than
// asking the directory pod and registering each new session there
// (bench federation: 3 pods answered a global connect in 1.02× a pool
// connect's time without it, 2.3× with it).
const DirectoryMinPods = 5

// UsesDirectory reports whether the pods of doc keep a session directory
// (R-G1): every pod with the same document agrees.
func UsesDirectory(doc *vdibroker.Federation) bool {
	return len(doc.Pods) >= DirectoryMinPods
}
