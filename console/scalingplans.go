package console

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/vdibroker/vdibroker"
)

// Scaling plans (R-SP, SPEC §8): a read-only list and a page per plan
// with its schedules, read through the API with the signed-in token, so a
// scoped token sees the plans of its pools only (R-SP5).

func planPath(name string) string { return apiPrefix + "/scalingplans/" + url.PathEscape(name) }

// scalingPlansPage is GET /scalingplans.
func (c *Console) scalingPlansPage(rq *request) {
	plans, err := list[vdibroker.ScalingPlan](rq.r.Context(), rq.api, apiPrefix+"/scalingplans")
	if err != nil {
		c.apiError(rq, err)
		return
	}
	c.page(rq, http.StatusOK, "scalingplans", map[string]any{"Title": "Scaling plans", "Nav": "scalingplans", "Plans": plans})
}

// phaseRow is one phase of a schedule as the plan page's table shows it.
type phaseRow struct {
	Phase, Start, Algorithm, MinimumHosts, Threshold, Notes string
}

// scheduleView is one schedule: its days and its four phases in order.
type scheduleView struct {
	Name, Days string
	Phases     []phaseRow
	Personal   []string
}

func pct(n int) string { return fmt.Sprintf("%d%%", n) }

func optPct(p *int, none string) string {
	if p == nil {
		return none
	}
	return pct(*p)
}

// viewSchedule lays a schedule out by phase; the settings a Personal plan
// has not are left empty.
func viewSchedule(planType string, s vdibroker.ScalingSchedule) scheduleView {
	v := scheduleView{Name: s.Name, Days: strings.Join(s.DaysOfWeek, ", ")}
	if planType == vdibroker.Personal {
		v.Phases = []phaseRow{
			{Phase: "Ramp-up", Start: s.RampUpStartTime}, {Phase: "Peak", Start: s.PeakStartTime},
			{Phase: "Ramp-down", Start: s.RampDownStartTime}, {Phase: "Off-peak", Start: s.OffPeakStartTime},
		}
		never := func(n int) string {
			if n == 0 {
				return "never"
			}
			return fmt.Sprintf("after %d min", n)
		}
		v.Personal = []string{"Stop a host after its user disconnected: " + never(s.StopHostAfterDisconnectMinutes),
			"Stop a host after its user logged off: " + never(s.StopHostAfterLogoffMinutes)}
		return v
	}
	down := fmt.Sprintf("stop when %s", s.RampDownStopHostsWhen)
	if s.RampDownForceLogoffUsers {
		down += fmt.Sprintf("; force logoff after %d min", s.RampDownWaitTimeMinutes)
		if s.RampDownNotificationMessage != "" {
			down += fmt.Sprintf(" with the message %q", s.RampDownNotificationMessage)
		}
	}
	v.Phases = []phaseRow{
		{"Ramp-up", s.RampUpStartTime, s.RampUpLoadBalancingAlgorithm, pct(s.RampUpMinimumHostsPct), pct(s.RampUpCapacityThresholdPct), ""},
		{"Peak", s.PeakStartTime, s.PeakLoadBalancingAlgorithm, optPct(s.PeakMinimumHostsPct, "–"), "", ""},
		{"Ramp-down", s.RampDownStartTime, s.RampDownLoadBalancingAlgorithm, pct(s.RampDownMinimumHostsPct), pct(s.RampDownCapacityThresholdPct), down},
		{"Off-peak", s.OffPeakStartTime, s.OffPeakLoadBalancingAlgorithm, "", "", "at most " + optPct(s.OffPeakMaximumHostsPct, "every host") + " running; lasts until the next ramp-up"},
	}
	return v
}

// scalingPlanPage is GET /scalingplans/{name}.
func (c *Console) scalingPlanPage(rq *request) {
	p, err := rq.api.getScalingPlan(rq.r.Context(), rq.r.PathValue("name"))
	if err != nil {
		c.apiError(rq, err)
		return
	}
	views := make([]scheduleView, len(p.Schedules))
	for i, s := range p.Schedules {
		views[i] = viewSchedule(p.HostPoolType, s)
	}
	c.page(rq, http.StatusOK, "scalingplan", map[string]any{
		"Title": "Scaling plan " + p.Name, "Nav": "scalingplans", "Plan": p, "Schedules": views,
	})
}

func (a *api) getScalingPlan(ctx context.Context, name string) (*vdibroker.ScalingPlan, error) {
	var p vdibroker.ScalingPlan
	if err := a.do(ctx, http.MethodGet, planPath(name), nil, &p); err != nil {
		return nil, err
	}
	return &p, nil
}
