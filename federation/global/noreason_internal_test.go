package global

import (
	"testing"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/federation"
)

// TestNoCapacityForAdministrator_RA4_RG1: a global connect that no
// member pool took says that it needs an administrator
// (ReasonStartByAdministrator, which the portal she connected to says in
// her words) only when every member pool of every pod in its decision
// refused her so: her own Personal desktop that no connect of hers
// starts again (R-A4). A pool full, or passed over by the plan, or a pod
// unreachable, may take her later: then the refusal has no reason.
func TestNoCapacityForAdministrator_RA4_RG1(t *testing.T) {
	admin := &vdibroker.Error{Code: vdibroker.ENoCapacity, Reason: vdibroker.ReasonStartByAdministrator, Message: "an administrator can start it again"}
	full := &vdibroker.Error{Code: vdibroker.ENoCapacity, Message: "full"}
	east, west := vdibroker.MemberCandidate{Pod: "pod0", HostPool: "east"}, vdibroker.MemberCandidate{Pod: "pod1", HostPool: "west"}
	decision := func() *vdibroker.GlobalDecision {
		return &vdibroker.GlobalDecision{GlobalEntitlement: "desk", Pods: []vdibroker.PodDecision{
			{Pod: "pod0", Pools: []vdibroker.PoolDecision{{HostPool: "east"}}},
			{Pod: "pod1", Pools: []vdibroker.PoolDecision{{HostPool: "west"}}},
		}}
	}
	for _, tc := range []struct {
		name    string
		refused map[vdibroker.MemberCandidate]error // nil: passed over by the plan
		pod1    string                              // pod1's own skip: unreachable
		want    string
	}{
		{"both for an administrator", map[vdibroker.MemberCandidate]error{east: admin, west: admin}, "", vdibroker.ReasonStartByAdministrator},
		{"one for an administrator, one full", map[vdibroker.MemberCandidate]error{east: admin, west: full}, "", ""},
		{"one for an administrator, one passed over by the plan", map[vdibroker.MemberCandidate]error{east: admin}, federation.SkipNoCapacity, ""},
		{"one for an administrator, its pod unreachable", map[vdibroker.MemberCandidate]error{east: admin}, "unavailable: timeout", ""},
		{"both full", map[vdibroker.MemberCandidate]error{east: full, west: full}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := decision()
			var byAdmin map[vdibroker.MemberCandidate]bool
			for _, c := range []vdibroker.MemberCandidate{east, west} {
				if err, ok := tc.refused[c]; ok {
					d.Skip(c, skipReason(err))
					byAdmin = forAdministrator(byAdmin, c, err)
				}
			}
			if tc.pod1 != "" {
				d.Pods[1].Skipped, d.Pods[1].Pools[0].Skipped = tc.pod1, tc.pod1
			}
			err := noCapacity(d, byAdmin)
			if vdibroker.ErrorCode(err) != vdibroker.ENoCapacity || vdibroker.ErrorReason(err) != tc.want {
				t.Errorf("%q reason %q, want NoCapacity %q: %v", vdibroker.ErrorCode(err), vdibroker.ErrorReason(err), tc.want, err)
			}
		})
	}
}
