// Package federation is the pure part of Cloud Pod Architecture (SPEC §7,
// R-G1..R-G5): validating the federation document, the load of member pools
// (R-G2) and of pods and sites, the start site (R-G3), the order in which a
// global connect tries member pools (R-G3, R-G4), the decision record, and
// the signing of pod-to-pod requests. It does no I/O: the broker gathers
// the facts (its own pools from its store, its peers' over the pod-to-pod
// API) and runs the plan this package makes.
//
// # Load of a pod and of a site
//
// R-G2 defines the load of one member pool. A pod's load, for one global
// entitlement, is the load its member pools of that entitlement would have
// if they were one pool; a site's load is the same over every member pool
// of its pods. Under LoadIndex that is the mean of the pools' loads weighted
// by their host counts (sessions × 100 / hosts over all desktop pools
// together; the mean of every host's load index over all farms together);
// under SessionCount it is the mean weighted by capacity (maxSessionLimit,
// or 150 when unlimited, × hosts), which is all their sessions over all
// their capacity. Pools that are missing on their pod or have no host, and
// pods that did not answer, weigh nothing; a pod or site with no weight has
// no load and is tried after those with one.
package federation
