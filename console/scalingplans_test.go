package console_test

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// words is a page's text with each tag a space and runs of white space
// one, so a table row reads "Ramp-up 07:00 BreadthFirst 20% 60%".
func words(page string) string {
	return strings.Join(strings.Fields(regexp.MustCompile(`<[^>]*>`).ReplaceAllString(page, " ")), " ")
}

func putPlan(t *testing.T, e *env, name, planType string, pools ...string) {
	t.Helper()
	peak := 40
	s := vdibroker.ScalingSchedule{Name: "workweek", DaysOfWeek: []string{"Monday", "Friday"},
		RampUpStartTime: "07:00", PeakStartTime: "09:00", RampDownStartTime: "17:00", OffPeakStartTime: "19:00"}
	if planType == vdibroker.Pooled {
		s.RampUpMinimumHostsPct, s.RampUpCapacityThresholdPct, s.PeakMinimumHostsPct = 20, 60, &peak
		s.RampDownMinimumHostsPct, s.RampDownCapacityThresholdPct = 10, 90
		s.RampDownForceLogoffUsers, s.RampDownWaitTimeMinutes, s.RampDownNotificationMessage = true, 15, "<b>bye</b>"
	} else {
		s.StopHostAfterDisconnectMinutes = 30
	}
	p := &vdibroker.ScalingPlan{TimeZone: "Europe/Berlin", HostPoolType: planType, HostPools: pools, Schedules: []vdibroker.ScalingSchedule{s}}
	if _, err := e.admin.PutScalingPlan(context.Background(), name, p); err != nil {
		t.Fatalf("put plan %s: %v", name, err)
	}
}

// TestScalingPlanPages: the nav links the scaling plans list; the list
// shows each plan with its pools; the plan page shows every phase of each
// schedule with its start, algorithm, minimum and threshold, the
// notification message escaped; a missing plan is a 404 page.
func TestScalingPlanPages(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for _, p := range []string{"office", "lab"} {
		if _, err := e.admin.PutHostPool(ctx, p, map[string]any{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.admin.PutHostPool(ctx, "desks", map[string]any{"hostPoolType": "Personal"}); err != nil {
		t.Fatal(err)
	}
	putPlan(t, e, "weekdays", vdibroker.Pooled, "office", "lab")
	putPlan(t, e, "personal", vdibroker.Personal, "desks")
	b := e.browser()
	b.signin(adminToken)
	if !strings.Contains(b.get("/").body, `href="/scalingplans"`) {
		t.Errorf("the nav does not link /scalingplans")
	}
	listPage := b.get("/scalingplans")
	wantStatus(t, listPage, 200)
	for _, want := range []string{`data-plan="weekdays"`, `data-plan="personal"`, `href="/scalingplans/weekdays"`, `href="/pools/lab"`, "Europe/Berlin"} {
		if !strings.Contains(listPage.body, want) {
			t.Errorf("the list lacks %s", want)
		}
	}
	page := b.get("/scalingplans/weekdays")
	wantStatus(t, page, 200)
	text := words(page.body)
	for _, want := range []string{
		"Ramp-up 07:00 BreadthFirst 20% 60%", "Peak 09:00 BreadthFirst 40%", "Ramp-down 17:00 DepthFirst 10% 90%",
		"force logoff after 15 min", "Off-peak 19:00 DepthFirst", "Monday, Friday",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the plan page lacks %q: %.600s", want, text)
		}
	}
	if strings.Contains(page.body, "<b>bye</b>") {
		t.Errorf("the notification message is not escaped")
	}
	personal := words(b.get("/scalingplans/personal").body)
	if !strings.Contains(personal, "disconnected: after 30 min") || !strings.Contains(personal, "logged off: never") {
		t.Errorf("the personal plan page lacks its stop-after settings: %.600s", personal)
	}
	wantStatus(t, b.get("/scalingplans/nope"), 404)
}

// TestScalingPlanPagesScoped_RSP5: a Reader scoped to one pool sees only
// the plans touching it; another plan's page is not found.
func TestScalingPlanPagesScoped_RSP5(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for _, p := range []string{"pin", "pout"} {
		if _, err := e.admin.PutHostPool(ctx, p, map[string]any{}); err != nil {
			t.Fatal(err)
		}
	}
	putPlan(t, e, "plan-in", vdibroker.Pooled, "pin")
	putPlan(t, e, "plan-out", vdibroker.Pooled, "pout")
	tok, err := e.admin.CreateToken(ctx, vhttp.TokenRequest{Role: "Reader", Subject: "r", HostPools: []string{"pin"}})
	if err != nil {
		t.Fatal(err)
	}
	b := e.browser()
	b.signin(tok.Secret)
	list := b.get("/scalingplans")
	wantStatus(t, list, 200)
	if !strings.Contains(list.body, `data-plan="plan-in"`) || strings.Contains(list.body, "plan-out") {
		t.Errorf("scoped list: want plan-in only")
	}
	wantStatus(t, b.get("/scalingplans/plan-out"), 404)
	wantStatus(t, b.get("/scalingplans/plan-in"), 200)
}
