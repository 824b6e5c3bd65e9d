package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	_ "time/tzdata" // plans name IANA zones; a host without tzdata still loads them

	"github.com/goccy/go-yaml"
	"github.com/spf13/cobra"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// scalingPlanColumns is the table of a scaling plan.
var scalingPlanColumns = []column{
	{"Name", "name"},
	{"HostPoolType", "hostPoolType"},
	// A Windows zone with the IANA zone it is evaluated in.
	{"TimeZone", "ianaTimeZone && join('', [timeZone, ' (', ianaTimeZone, ')']) || timeZone"},
	{"HostPools", "hostPools"},
	{"Schedules", "schedules[].name"},
}

// planView is a scaling plan as the CLI shows it: a plan keeps the time
// zone as its admin wrote it, and one in a Windows name ("W. Europe
// Standard Time") also shows ianaTimeZone, the zone its schedules are
// evaluated in ("Europe/Berlin").
type planView struct {
	*vdibroker.ScalingPlan
	IANATimeZone string `json:"ianaTimeZone,omitempty"`
}

func viewPlan(p *vdibroker.ScalingPlan) planView {
	v := planView{ScalingPlan: p}
	if vdibroker.IsWindowsTimeZone(p.TimeZone) {
		v.IANATimeZone = vdibroker.IANATimeZone(p.TimeZone)
	}
	return v
}

// scheduleFlag is the flag of a schedule setting: its JSON path in kebab
// case (rampUpStartTime: --ramp-up-start-time), and --schedule-name for the
// schedule's name.
func scheduleFlag(f vdibroker.PlanField) string {
	if f.Path == "name" {
		return "schedule-name"
	}
	return flagName(f.Field)
}

// scheduleUsage is the flag's help from the plan schema.
func scheduleUsage(f vdibroker.PlanField, defaults bool) string {
	u := f.Help
	switch f.Kind {
	case vdibroker.KindBool:
	case vdibroker.KindEnum:
		u += "; " + strings.Join(f.Values(""), ", ")
	default:
		u += ", " + f.Range()
	}
	if f.Path == "daysOfWeek" {
		u += " (comma-separated)"
	}
	if f.Zero != "" {
		u += fmt.Sprintf(" (0: %s)", f.Zero)
	}
	if f.PoolTypes != nil {
		u += " (" + strings.Join(f.PoolTypes, ", ") + " plans only)"
	}
	if defaults && f.Path == "name" {
		u += ` (default "default")`
	}
	if defaults && f.Kind == vdibroker.KindEnum && f.DefaultFor(vdibroker.Pooled) != "" {
		u += fmt.Sprintf(" (default %s)", f.DefaultText(vdibroker.Pooled))
	}
	return u
}

// clockValue is a schedule time flag, checked as it is parsed.
type clockValue struct{ v *string }

func (c clockValue) String() string { return *c.v }
func (c clockValue) Type() string   { return "HH:MM" }
func (c clockValue) Set(s string) error {
	if _, err := vdibroker.ParseClock(s); err != nil {
		return errors.New(strings.TrimPrefix(vdibroker.ErrorMessage(err), "time: "))
	}
	*c.v = s
	return nil
}

// addScheduleFlags registers a flag per schedule setting of the plan
// schema, so that one schedule can be given on the command line. Like the
// host pool flags, only the flags given are read back.
func addScheduleFlags(cmd *cobra.Command, defaults bool) {
	f := cmd.Flags()
	for _, pf := range vdibroker.PlanFields() {
		name, usage := scheduleFlag(pf), scheduleUsage(pf, defaults)
		switch {
		case pf.Path == "daysOfWeek":
			f.StringSlice(name, nil, usage)
			_ = cmd.RegisterFlagCompletionFunc(name, fixedCompletion(vdibroker.DaysOfWeek...))
		case pf.Kind == vdibroker.KindTime:
			f.Var(clockValue{new(string)}, name, usage)
		case pf.Kind == vdibroker.KindInt || pf.Kind == vdibroker.KindEnum:
			var def any
			if defaults && pf.Kind == vdibroker.KindInt {
				def = pf.Default
			}
			f.Var(&fieldValue{f: pf.Field, v: def}, name, usage)
			if pf.Kind == vdibroker.KindEnum {
				_ = cmd.RegisterFlagCompletionFunc(name, fixedCompletion(pf.Values("")...))
			}
		case pf.Kind == vdibroker.KindBool:
			f.Var(boolValue{new(bool)}, name, usage)
		case pf.Kind == vdibroker.KindText:
			textVar(f, new(string), name, int(pf.Max), usage)
		default:
			f.String(name, "", usage)
		}
	}
}

// scheduleFromFlags returns the schedule settings whose flags were set; with
// defaults (a new schedule), the int settings of planType not given take
// the schema's defaults, as the flags' help says.
func scheduleFromFlags(cmd *cobra.Command, into map[string]any, planType string, defaults bool) (changed bool, err error) {
	f := cmd.Flags()
	for _, pf := range vdibroker.PlanFields() {
		name := scheduleFlag(pf)
		if !f.Changed(name) {
			if defaults && pf.Kind == vdibroker.KindInt && pf.Default != nil && pf.AppliesTo(planType) {
				if _, ok := into[pf.Path]; !ok {
					into[pf.Path] = pf.Default
				}
			}
			continue
		}
		changed = true
		var v any
		switch {
		case pf.Path == "daysOfWeek":
			v, err = f.GetStringSlice(name)
		case pf.Kind == vdibroker.KindTime:
			v = f.Lookup(name).Value.String()
		case pf.Kind == vdibroker.KindInt || pf.Kind == vdibroker.KindEnum:
			v = f.Lookup(name).Value.(*fieldValue).v
		case pf.Kind == vdibroker.KindBool:
			v, err = strconvBool(f.Lookup(name).Value.String())
		default:
			v, err = f.GetString(name)
		}
		if err != nil {
			return false, usageError{fmt.Errorf("--%s: %w", name, err)}
		}
		into[pf.Path] = v
	}
	return changed, nil
}

// readSchedulesFile reads a JSON or YAML file holding a list of schedules
// or an object with a "schedules" list (a plan body).
func readSchedulesFile(path string) ([]any, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, usageError{fmt.Errorf("--schedules-file: %w", err)}
	}
	js, err := yaml.YAMLToJSON(data) // JSON is YAML too
	if err != nil {
		return nil, usageError{fmt.Errorf("--schedules-file %s: not JSON or YAML: %v", path, err)}
	}
	var doc any
	if err := json.Unmarshal(js, &doc); err != nil {
		return nil, usageError{fmt.Errorf("--schedules-file %s: %v", path, err)}
	}
	if m, ok := doc.(map[string]any); ok {
		doc = m["schedules"]
	}
	list, ok := doc.([]any)
	if !ok || len(list) == 0 {
		return nil, usageError{fmt.Errorf("--schedules-file %s: want a list of schedules (or an object with a \"schedules\" list)", path)}
	}
	return list, nil
}

// planFlags are the plan-level flags of create and update.
type planFlags struct {
	name, timeZone, hostPoolType, description, schedulesFile string
	hostPools                                                []string
}

func addPlanFlags(cmd *cobra.Command, p *planFlags, create bool) {
	f := cmd.Flags()
	poolNameVar(f, &p.name, "name", "n", fmt.Sprintf("scaling plan name, %d..%d characters of A-Za-z0-9@._- and space", vdibroker.MinPoolNameLen, vdibroker.MaxPoolNameLen))
	f.StringVar(&p.timeZone, "time-zone", "", "time zone of the schedules' times: IANA (Europe/Berlin, UTC) or Windows as AVD names them (W. Europe Standard Time)")
	help := "Pooled or Personal: the type of the plan's host pools"
	if create {
		help += " (default Pooled)"
	}
	f.Var(&enumValue{v: &p.hostPoolType, allowed: []string{vdibroker.Pooled, vdibroker.Personal}}, "host-pool-type", help)
	f.StringSliceVar(&p.hostPools, "host-pools", nil, "host pools the plan scales (comma-separated); each in at most one plan")
	textVar(f, &p.description, "description", vdibroker.MaxTextLen, fmt.Sprintf("free text about the plan, at most %d characters", vdibroker.MaxTextLen))
	f.StringVar(&p.schedulesFile, "schedules-file", "", "JSON or YAML file with the plan's schedules (instead of the schedule flags)")
	_ = cmd.RegisterFlagCompletionFunc("host-pool-type", fixedCompletion(vdibroker.Pooled, vdibroker.Personal))
	addScheduleFlags(cmd, create)
	requireFlags(cmd, "name")
}

// apply sets the plan-level flags given on body.
func (p *planFlags) apply(cmd *cobra.Command, body map[string]any) {
	f := cmd.Flags()
	for flag, key := range map[string]string{"time-zone": "timeZone", "host-pool-type": "hostPoolType", "description": "description"} {
		if f.Changed(flag) {
			body[key] = f.Lookup(flag).Value.String()
		}
	}
	if f.Changed("host-pools") {
		body["hostPools"] = p.hostPools
	}
}

func newScalingPlanCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "scalingplan",
		Aliases: []string{"scaling-plan"},
		Short:   "Manage scaling plans (autoscale schedules of host pools)",
		Long: strings.TrimSpace(`
Manage scaling plans, in the spirit of az desktopvirtualization scaling-plan.
One schedule can be given with flags, several with --schedules-file:

  vdibroker scalingplan create --name weekdays --time-zone Europe/Berlin --host-pools contosohp01 \
    --schedule-name workweek --days-of-week Monday,Tuesday,Wednesday,Thursday,Friday \
    --ramp-up-start-time 07:00 --peak-start-time 09:00 --ramp-down-start-time 17:00 --off-peak-start-time 19:00
  vdibroker scalingplan update --name weekdays --schedule-name workweek --ramp-down-capacity-threshold-pct 80
  vdibroker scalingplan show --name weekdays --output json
  vdibroker scalingplan evaluations --host-pool contosohp01 --top 10`),
	}
	a := addAdminFlags(cmd)
	cmd.AddCommand(
		newScalingPlanCreateCmd(a),
		newScalingPlanUpdateCmd(a),
		newScalingPlanShowCmd(a),
		newScalingPlanListCmd(a),
		newScalingPlanDeleteCmd(a),
		newScalingPlanEvaluationsCmd(a),
	)
	a.completeNames(cmd, "")
	a.suggestNames(cmd, kindPlan)
	return cmd
}

func newScalingPlanCreateCmd(a *admin) *cobra.Command {
	var p planFlags
	cmd := &cobra.Command{
		Use:   "create --name NAME --time-zone TZ (--schedules-file FILE | schedule flags) [flags]",
		Short: "Create a scaling plan",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			body := map[string]any{"name": p.name}
			p.apply(cmd, body)
			planType := firstNonEmpty(p.hostPoolType, vdibroker.Pooled)
			sched := map[string]any{}
			changed, err := scheduleFromFlags(cmd, sched, planType, true)
			if err != nil {
				return err
			}
			switch {
			case p.schedulesFile != "" && changed:
				return usageError{errors.New("give either --schedules-file or schedule flags, not both")}
			case p.schedulesFile != "":
				if body["schedules"], err = readSchedulesFile(p.schedulesFile); err != nil {
					return err
				}
			case changed:
				if _, ok := sched["name"]; !ok {
					sched["name"] = "default"
				}
				body["schedules"] = []any{sched}
			default:
				return usageError{errors.New("a plan needs a schedule: give --schedules-file, or --days-of-week and the four --*-start-time flags")}
			}
			// A create must not replace a plan of the same name, even one
			// created at the same moment (R-E13).
			res, err := createOnly(func(cond vhttp.Condition) (*vhttp.ScalingPlanResult, error) {
				return c.PutScalingPlan(cmd.Context(), p.name, body, cond)
			}, func() error {
				_, err := c.GetScalingPlan(cmd.Context(), p.name)
				return err
			}, fmt.Errorf("scaling plan %q already exists; change it with scalingplan update", p.name))
			if err != nil {
				return err
			}
			return a.result(cmd, viewPlan(&res.ScalingPlan), scalingPlanColumns)
		},
	}
	addPlanFlags(cmd, &p, true)
	return cmd
}

func newScalingPlanUpdateCmd(a *admin) *cobra.Command {
	var p planFlags
	cmd := &cobra.Command{
		Use:   "update --name NAME [flags]",
		Short: "Change a scaling plan (only the flags given change; schedule flags change the schedule --schedule-name names, or add it)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			// Only over the plan read (If-Match, R-E13): a plan changed in
			// between is read again and the same flags applied to it.
			res, err := updateIfMatch(cmd.Context(), "scaling plan "+p.name, "vdibroker scalingplan show --name "+p.name, func() (*vhttp.ScalingPlanResult, error) {
				old, err := c.GetScalingPlanETag(cmd.Context(), p.name)
				if err != nil {
					return nil, err
				}
				raw, err := json.Marshal(&old.ScalingPlan)
				if err != nil {
					return nil, err
				}
				var body map[string]any
				if err := json.Unmarshal(raw, &body); err != nil {
					return nil, err
				}
				delete(body, "createTime")
				delete(body, "updateTime")
				p.apply(cmd, body)
				planType, _ := body["hostPoolType"].(string)
				changedTop := cmd.Flags().Changed("host-pools") || cmd.Flags().Changed("time-zone") ||
					cmd.Flags().Changed("description") || cmd.Flags().Changed("host-pool-type")
				if p.schedulesFile != "" {
					if body["schedules"], err = readSchedulesFile(p.schedulesFile); err != nil {
						return nil, err
					}
					changedTop = true
				}
				schedules, _ := body["schedules"].([]any)
				target := map[string]any{}
				schedName, _ := cmd.Flags().GetString("schedule-name")
				idx := -1
				for i, s := range schedules {
					if m, ok := s.(map[string]any); ok && (m["name"] == schedName || schedName == "" && len(schedules) == 1) {
						idx, target = i, m
					}
				}
				changed, err := scheduleFromFlags(cmd, target, planType, idx < 0)
				if err != nil {
					return nil, err
				}
				if changed && p.schedulesFile != "" {
					return nil, usageError{errors.New("give either --schedules-file or schedule flags, not both")}
				}
				if changed && idx < 0 {
					if schedName == "" {
						return nil, usageError{fmt.Errorf("plan %q has %d schedules: say which with --schedule-name", p.name, len(schedules))}
					}
					schedules = append(schedules, target) // a new schedule
				}
				body["schedules"] = schedules
				if !changed && !changedTop {
					return nil, usageError{errors.New("nothing to update: give at least one flag, e.g. --time-zone UTC or --schedule-name NAME --peak-start-time 10:00")}
				}
				return c.PutScalingPlan(cmd.Context(), p.name, body, vhttp.Condition{IfMatch: old.ETag})
			})
			if err != nil {
				return err
			}
			return a.result(cmd, viewPlan(&res.ScalingPlan), scalingPlanColumns)
		},
	}
	addPlanFlags(cmd, &p, false)
	return cmd
}

func newScalingPlanShowCmd(a *admin) *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:   "show --name NAME",
		Short: "Show a scaling plan",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			p, err := c.GetScalingPlan(cmd.Context(), name)
			if err != nil {
				return fail(err)
			}
			return a.show(cmd, viewPlan(p), scalingPlanColumns)
		},
	}
	poolNameVar(cmd.Flags(), &name, "name", "n", "scaling plan name")
	requireFlags(cmd, "name")
	return cmd
}

func newScalingPlanListCmd(a *admin) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List scaling plans",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			plans, err := c.ListScalingPlans(cmd.Context())
			if err != nil {
				return fail(err)
			}
			views := make([]planView, len(plans))
			for i, p := range plans {
				views[i] = viewPlan(p)
			}
			return a.show(cmd, views, scalingPlanColumns)
		},
	}
}

func newScalingPlanDeleteCmd(a *admin) *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:   "delete --name NAME",
		Short: "Delete a scaling plan (its host pools keep running as they are)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			if err := c.DeleteScalingPlan(cmd.Context(), name); err != nil {
				return fail(err)
			}
			return a.deleted(cmd, deletion{Deleted: "scalingplan", Name: name})
		},
	}
	poolNameVar(cmd.Flags(), &name, "name", "n", "scaling plan name")
	requireFlags(cmd, "name")
	return cmd
}

// autoscaleEvaluationColumns is the table of the autoscaler's evaluations
// of a pool: when, where the plan was, the figures of R-A1 and
// what was done, or why nothing was.
var autoscaleEvaluationColumns = []column{
	{"Time", "time"},
	{"Holder", "holder"},
	{"Phase", "phase"},
	{"Running", "runningHosts"},
	{"Sessions", "sessions"},
	{"UsedPct", "usedCapacityPct"},
	{"ThresholdPct", "capacityThresholdPct"},
	{"Actions", "actions[].join(' ', [action, sessionHost || ''])"},
	{"Note", "note"},
}

func newScalingPlanEvaluationsCmd(a *admin) *cobra.Command {
	var (
		pool string
		top  int
	)
	cmd := &cobra.Command{
		Use:   "evaluations --host-pool NAME [--top N]",
		Short: "List the autoscaler's evaluations of a host pool, newest first, each action with its reason",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if top < 1 || top > 1000 {
				return usageError{fmt.Errorf("--top: must be 1..1000, got %d", top)}
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			list, err := c.AutoscaleEvaluations(cmd.Context(), pool, top)
			if err != nil {
				return fail(err)
			}
			return a.show(cmd, list, autoscaleEvaluationColumns)
		},
	}
	poolNameVar(cmd.Flags(), &pool, "host-pool", "", "host pool name")
	cmd.Flags().IntVar(&top, "top", 20, "how many evaluations, 1..1000")
	requireFlags(cmd, "host-pool")
	return cmd
}
