package store_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/store"
)

// A group's ETag covers its set of applications (R-E13, R-E1): adding
// or removing an application moves its group's update time in the same
// transaction, so a write of the group with the If-Match of a read
// before it is refused and deletes nothing unseen.

func groupApp(group, name, path string) *vdibroker.Application {
	return &vdibroker.Application{Name: name, ApplicationGroup: group, FilePath: path,
		CommandLineSetting: vdibroker.CommandLineDoNotAllow, CreateTime: t0, UpdateTime: t0}
}

// TestGroupETagCoversApps_RE13: an application's create and delete move
// its group's update time (ETag); a DELETE or PUT of the group with the
// tag read before either is PreconditionFailed and writes nothing (the
// application added stays); a change of an application keeps its
// group's tag; with the tag read after, the delete takes the group and
// its applications.
func TestGroupETagCoversApps_RE13(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		none := vdibroker.Precondition{}
		mustPool(t, s, pool("p", vdibroker.Pooled))
		mustAppGroup(t, s, appGroup("p-apps", "p", vdibroker.AppGroupRemoteApp, vdibroker.Assignments{Users: []string{"alice"}}))
		if _, err := s.PutApplication(ctx, groupApp("p-apps", "word", "word.exe"), none); err != nil {
			t.Fatal(err)
		}
		read := gtime(s.GetApplicationGroup(ctx, "p-apps"))

		// Another administrator adds excel.
		if _, err := s.PutApplication(ctx, groupApp("p-apps", "excel", "excel.exe"), none); err != nil {
			t.Fatal(err)
		}
		added := gtime(s.GetApplicationGroup(ctx, "p-apps"))
		if !added.After(read) {
			t.Fatalf("adding an application left its group's update time at %v (was %v): its ETag did not change", added, read)
		}
		if err := s.DeleteApplicationGroup(ctx, "p-apps", ifMatch(read)); vdibroker.ErrorCode(err) != vdibroker.EPreconditionFailed {
			t.Errorf("delete of the group with the tag read before excel was added: %v, want PreconditionFailed", err)
		}
		if _, err := s.GetApplication(ctx, "p-apps", "excel"); err != nil {
			t.Errorf("excel after the refused delete: %v", err)
		}
		g := appGroup("p-apps", "p", vdibroker.AppGroupRemoteApp, vdibroker.Assignments{Users: []string{"alice", "bob"}})
		if _, err := s.PutApplicationGroup(ctx, g, ifMatch(read)); vdibroker.ErrorCode(err) != vdibroker.EPreconditionFailed {
			t.Errorf("PUT of the group with the tag read before excel was added: %v, want PreconditionFailed", err)
		}
		if got, err := s.GetApplicationGroup(ctx, "p-apps"); err != nil || fmt.Sprint(got.Assignments.Users) != "[alice]" || !got.UpdateTime.Equal(added) {
			t.Errorf("the group after the refused PUT: %v, %v; want alice alone at %v", got, err, added)
		}

		// A change of an application keeps its group's tag.
		change := groupApp("p-apps", "excel", `C:\Office\excel.exe`)
		if _, err := s.PutApplication(ctx, change, none); err != nil {
			t.Fatal(err)
		}
		if now := gtime(s.GetApplicationGroup(ctx, "p-apps")); !now.Equal(added) {
			t.Errorf("changing an application moved its group's update time %v to %v", added, now)
		}

		// Removing one moves it too; the tag read before is refused.
		if err := s.DeleteApplication(ctx, "p-apps", "word", none); err != nil {
			t.Fatal(err)
		}
		removed := gtime(s.GetApplicationGroup(ctx, "p-apps"))
		if !removed.After(added) {
			t.Errorf("removing an application left its group's update time at %v (was %v)", removed, added)
		}
		if err := s.DeleteApplicationGroup(ctx, "p-apps", ifMatch(added)); vdibroker.ErrorCode(err) != vdibroker.EPreconditionFailed {
			t.Errorf("delete of the group with the tag read before word was removed: %v, want PreconditionFailed", err)
		}
		// A refused application create (If-None-Match on one that
		// exists) moves nothing.
		if _, err := s.PutApplication(ctx, groupApp("p-apps", "excel", "x.exe"), vdibroker.Precondition{Absent: true}); vdibroker.ErrorCode(err) != vdibroker.EPreconditionFailed {
			t.Errorf("create of an application that exists: %v, want PreconditionFailed", err)
		}
		if now := gtime(s.GetApplicationGroup(ctx, "p-apps")); !now.Equal(removed) {
			t.Errorf("a refused application create moved its group's update time %v to %v", removed, now)
		}

		// The tag read now deletes the group with its application.
		if err := s.DeleteApplicationGroup(ctx, "p-apps", ifMatch(removed)); err != nil {
			t.Fatalf("delete with the current tag: %v", err)
		}
		mustAppGroup(t, s, appGroup("p-apps", "p", vdibroker.AppGroupRemoteApp, vdibroker.Assignments{}))
		if apps, err := s.ListApplications(ctx, "p-apps"); err != nil || len(apps) != 0 {
			t.Errorf("the group made again under the deleted one's name has applications %v, %v: want none", apps, err)
		}
	})
}

// TestAppAddRacesGroupDelete_RE13: an application's create and its
// group's delete race, through two stores on one database (two
// replicas), the delete with the If-Match of the group read before: the
// create lands first and the delete is refused, the application there,
// or the delete lands first and the create finds no group; never both,
// and no application is left without its group (a group made again
// under the name has none). Without If-Match the delete may take the
// application, but then the create answered success before it and the
// application went with the group: still none is left over.
func TestAppAddRacesGroupDelete_RE13(t *testing.T) {
	run(t, func(t *testing.T, tg target) {
		a, b := tg.open(t, store.Options{}), tg.open(t, store.Options{})
		ctx := t.Context()
		none := vdibroker.Precondition{}
		mustPool(t, a, pool("p", vdibroker.Pooled))
		landed := map[string]int{}
		for round := range 12 {
			conditional := round%2 == 0
			mustAppGroup(t, a, appGroup("p-apps", "p", vdibroker.AppGroupRemoteApp, vdibroker.Assignments{}))
			if _, err := a.PutApplication(ctx, groupApp("p-apps", "word", "word.exe"), none); err != nil {
				t.Fatal(err)
			}
			read := gtime(a.GetApplicationGroup(ctx, "p-apps"))
			pre := none
			if conditional {
				pre = ifMatch(read)
			}
			var wg sync.WaitGroup
			var perr, derr error
			start := make(chan struct{})
			wg.Go(func() {
				<-start
				_, perr = a.PutApplication(ctx, groupApp("p-apps", "excel", "excel.exe"), none)
			})
			wg.Go(func() {
				<-start
				derr = b.DeleteApplicationGroup(ctx, "p-apps", pre)
			})
			close(start)
			wg.Wait()
			_, gerr := a.GetApplicationGroup(ctx, "p-apps")
			_, aerr := a.GetApplication(ctx, "p-apps", "excel")
			groupThere, excelThere := gerr == nil, aerr == nil
			switch {
			case perr != nil && derr != nil:
				t.Errorf("round %d: neither landed: create %v, delete %v", round, perr, derr)
			case conditional && perr == nil && derr == nil:
				t.Errorf("round %d: the create and the delete with the tag read before it both landed: excel deleted unseen", round)
			case perr == nil && derr != nil:
				landed["create first"]++
				if vdibroker.ErrorCode(derr) != vdibroker.EPreconditionFailed || !groupThere || !excelThere {
					t.Errorf("round %d: the create landed, the delete %v; group there %v, excel there %v", round, derr, groupThere, excelThere)
				}
			case perr != nil:
				landed["delete first"]++
				if vdibroker.ErrorCode(perr) != vdibroker.ENotFound || groupThere {
					t.Errorf("round %d: the delete landed, the create %v; group there %v", round, perr, groupThere)
				}
			default:
				landed["both, unconditional delete"]++
				if groupThere {
					t.Errorf("round %d: the unconditional delete landed, the group is still there", round)
				}
			}
			if groupThere {
				if err := a.DeleteApplicationGroup(ctx, "p-apps", none); err != nil {
					t.Fatal(err)
				}
			}
			// Nothing of the deleted group is left over.
			mustAppGroup(t, a, appGroup("p-apps", "p", vdibroker.AppGroupRemoteApp, vdibroker.Assignments{}))
			if apps, err := a.ListApplications(ctx, "p-apps"); err != nil || len(apps) != 0 {
				t.Errorf("round %d: the group made again has applications %v, %v: left by the deleted one", round, apps, err)
			}
			if err := a.DeleteApplicationGroup(ctx, "p-apps", none); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("outcomes: %v", landed)
	})
}
