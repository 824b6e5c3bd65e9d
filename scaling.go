package vdibroker

import (
	"context"
	"time"
)

// Scaling plan phases (SPEC §8), in the order a day goes through them.
const (
	PhaseRampUp   = "RampUp"
	PhasePeak     = "Peak"
	PhaseRampDown = "RampDown"
	PhaseOffPeak  = "OffPeak"
)

// Values of rampDownStopHostsWhen (SPEC §8).
const (
	StopWhenZeroSessions       = "ZeroSessions"
	StopWhenZeroActiveSessions = "ZeroActiveSessions"
)

// ScalingPlan is an autoscale plan for pooled host pools (R-SP, SPEC
// §8), with Azure Virtual Desktop's field names. Times are "HH:MM" in the
// plan's TimeZone (an IANA name such as "Europe/Berlin").
type ScalingPlan struct {
	Name         string            `json:"name"`
	Description  string            `json:"description"`
	TimeZone     string            `json:"timeZone"`
	HostPoolType string            `json:"hostPoolType"` // Pooled or Personal
	HostPools    []string          `json:"hostPools"`
	Schedules    []ScalingSchedule `json:"schedules"`
	CreateTime   time.Time         `json:"createTime"`
	UpdateTime   time.Time         `json:"updateTime"`
}

// ScalingSchedule is one schedule of a plan: the days it applies to and
// its four phases. The *MinimumHostsPct and *MaximumHostsPct fields that
// AVD does not have are marked; PeakMinimumHostsPct and
// OffPeakMaximumHostsPct are nil when not set.
type ScalingSchedule struct {
	Name       string   `json:"name"`
	DaysOfWeek []string `json:"daysOfWeek"` // "Monday".."Sunday"

	RampUpStartTime              string `json:"rampUpStartTime"`
	RampUpLoadBalancingAlgorithm string `json:"rampUpLoadBalancingAlgorithm"`
	RampUpMinimumHostsPct        int    `json:"rampUpMinimumHostsPct"`
	RampUpCapacityThresholdPct   int    `json:"rampUpCapacityThresholdPct"`

	PeakStartTime              string `json:"peakStartTime"`
	PeakLoadBalancingAlgorithm string `json:"peakLoadBalancingAlgorithm"`
	// PeakMinimumHostsPct is our addition: a floor of running hosts at peak.
	PeakMinimumHostsPct *int `json:"peakMinimumHostsPct,omitempty"`

	RampDownStartTime              string `json:"rampDownStartTime"`
	RampDownLoadBalancingAlgorithm string `json:"rampDownLoadBalancingAlgorithm"`
	RampDownMinimumHostsPct        int    `json:"rampDownMinimumHostsPct"`
	RampDownCapacityThresholdPct   int    `json:"rampDownCapacityThresholdPct"`
	RampDownForceLogoffUsers       bool   `json:"rampDownForceLogoffUsers"`
	RampDownWaitTimeMinutes        int    `json:"rampDownWaitTimeMinutes"`
	RampDownNotificationMessage    string `json:"rampDownNotificationMessage"`
	RampDownStopHostsWhen          string `json:"rampDownStopHostsWhen"`

	OffPeakStartTime              string `json:"offPeakStartTime"`
	OffPeakLoadBalancingAlgorithm string `json:"offPeakLoadBalancingAlgorithm"`
	// OffPeakMaximumHostsPct is our addition: a cap of running hosts
	// off-peak.
	OffPeakMaximumHostsPct *int `json:"offPeakMaximumHostsPct,omitempty"`

	// Personal plans (HostPoolType Personal): stop a host this many
	// minutes after its user disconnected or logged off (0: never).
	StopHostAfterDisconnectMinutes int `json:"stopHostAfterDisconnectMinutes,omitempty"`
	StopHostAfterLogoffMinutes     int `json:"stopHostAfterLogoffMinutes,omitempty"`
}

// ScalingStore is the store's part of scaling plans (R-SP, SPEC §8).
type ScalingStore interface {
	// PutScalingPlan creates (created=true) or replaces a plan; CreateTime
	// is kept on replace. A pool is in at most one plan: naming a pool of
	// another plan is refused with Conflict on field hostPools. pre is
	// checked in the same transaction (PreconditionFailed, R-E13).
	PutScalingPlan(ctx context.Context, p *ScalingPlan, pre Precondition) (created bool, err error)
	GetScalingPlan(ctx context.Context, name string) (*ScalingPlan, error)
	// ListScalingPlans lists plans by name.
	ListScalingPlans(ctx context.Context) ([]*ScalingPlan, error)
	// pre (a DELETE's If-Match) is checked in the delete's transaction
	// (PreconditionFailed, R-E13).
	DeleteScalingPlan(ctx context.Context, name string, pre Precondition) error
	// ScalingPlanForPool returns the plan that names the pool; NotFound
	// when none does.
	ScalingPlanForPool(ctx context.Context, pool string) (*ScalingPlan, error)
}

// Autoscale actions (AutoscaleAction.Action), as evaluation records and
// the metrics name them (R-A2, R-A3).
const (
	ActionStart           = "Start"
	ActionDrain           = "Drain"
	ActionUndrain         = "Undrain"
	ActionNotify          = "Notify"
	ActionLogoff          = "Logoff"
	ActionStop            = "Stop"
	ActionSetLoadBalancer = "SetLoadBalancer"
)

// AutoscaleEvaluation is the record of one evaluation of a pool by the
// autoscaler: where the plan was, the figures of R-A1 and R-A2,
// and what was done with the reason for each, or in Note why nothing was.
type AutoscaleEvaluation struct {
	Seq      int64     `json:"seq"`
	HostPool string    `json:"hostPool"`
	Time     time.Time `json:"time"`
	// Holder is the replica (lease holder) that evaluated.
	Holder   string `json:"holder"`
	Plan     string `json:"scalingPlan"`
	Schedule string `json:"schedule"`
	Phase    string `json:"phase"`
	// LocalTime is Time in the plan's time zone, as the schedule reads it.
	LocalTime string `json:"localTime"`
	// Hosts counts the hosts the autoscaler manages: every host of the
	// pool but those an admin drained.
	Hosts         int `json:"hosts"`
	RunningHosts  int `json:"runningHosts"`
	StartingHosts int `json:"startingHosts"`
	Sessions      int `json:"sessions"`
	// AvailableCapacity is maxSessionLimit × running placeable hosts (R-A1).
	AvailableCapacity int `json:"availableCapacity"`
	// UsedCapacityPct is Sessions / AvailableCapacity in percent (R-A1);
	// 100 when sessions exist without capacity.
	UsedCapacityPct float64 `json:"usedCapacityPct"`
	ThresholdPct    int     `json:"capacityThresholdPct"`
	MinimumHosts    int     `json:"minimumHosts"`
	// MaximumHosts is the off-peak cap (offPeakMaximumHostsPct); nil when
	// none applies.
	MaximumHosts *int              `json:"maximumHosts,omitempty"`
	Actions      []AutoscaleAction `json:"actions"`
	Note         string            `json:"note,omitempty"`
}

// AutoscaleAction is one thing an evaluation did (or tried: Error says why
// it failed), on one host or on the pool (Host empty).
type AutoscaleAction struct {
	Action string `json:"action"`
	Host   string `json:"sessionHost,omitempty"`
	Reason string `json:"reason"`
	Error  string `json:"error,omitempty"`
}

// AutoscaleState is what the autoscaler remembers of a pool between
// evaluations (kept in the store, so another replica that takes the lease
// carries on): the load balancer the admin had set before the plan's, and
// the hosts it is draining or watching.
type AutoscaleState struct {
	HostPool string `json:"hostPool"`
	// OriginalLoadBalancer is the pool's loadBalancerType before the
	// plan's phase set AppliedLoadBalancer; restored when no plan covers
	// the pool any more, unless an admin changed it meanwhile.
	OriginalLoadBalancer string                         `json:"originalLoadBalancer,omitempty"`
	AppliedLoadBalancer  string                         `json:"appliedLoadBalancer,omitempty"`
	Hosts                map[string]*AutoscaleHostState `json:"hosts,omitempty"`
	UpdateTime           time.Time                      `json:"updateTime"`
}

// AutoscaleHostState is a host the autoscaler drains to stop (R-A3), has
// started, or, in a personal pool, watches while it is idle.
type AutoscaleHostState struct {
	// DrainTime is when the autoscale drain began: the wait of
	// rampDownWaitTimeMinutes counts from it, across evaluations.
	DrainTime *time.Time `json:"drainTime,omitempty"`
	// MinSessions is the fewest sessions (per rampDownStopHostsWhen) seen
	// on the host since the drain began: more than that later means the
	// host got a session, and is kept running (R-A3).
	MinSessions int  `json:"minSessions"`
	Notified    bool `json:"notified,omitempty"`
	LoggedOff   bool `json:"loggedOff,omitempty"`
	// IdleSince is when a personal host was first seen without sessions
	// (its user logged off).
	IdleSince *time.Time `json:"idleSince,omitempty"`
	// StartTime is when the autoscaler started the host, while it is
	// Starting: past the start timeout it no longer counts as capacity
	// to come.
	StartTime *time.Time `json:"startTime,omitempty"`
}

// AutoscaleStore is the store's part of the autoscaler: the
// record of every evaluation, what the autoscaler remembers between
// evaluations, and the lease that lets exactly one replica evaluate at a
// time.
type AutoscaleStore interface {
	// AcquireAutoscaleLease takes the autoscale lease for holder until
	// now+ttl, or renews it, if it is free, expired at now, or already
	// holder's; it reports whether holder has it. One conditional write,
	// so of replicas racing for it exactly one wins.
	AcquireAutoscaleLease(ctx context.Context, holder string, now time.Time, ttl time.Duration) (bool, error)
	// ReleaseAutoscaleLease gives the lease up if holder has it, so another
	// replica takes over at once rather than at its expiry.
	ReleaseAutoscaleLease(ctx context.Context, holder string) error
	// AppendAutoscaleEvaluation records an evaluation and sets its Seq. A
	// pool keeps its last MaxAutoscaleEvaluations; PruneHistory deletes
	// older ones by time with the rest of the history.
	AppendAutoscaleEvaluation(ctx context.Context, e *AutoscaleEvaluation) error
	// ListAutoscaleEvaluations lists a pool's evaluations newest first,
	// those with Seq < before when before > 0, at most limit (0: 100).
	ListAutoscaleEvaluations(ctx context.Context, pool string, before int64, limit int) ([]*AutoscaleEvaluation, error)
	// ListAutoscaleStates returns every pool's autoscale state.
	ListAutoscaleStates(ctx context.Context) ([]*AutoscaleState, error)
	// PutAutoscaleState creates or replaces a pool's state.
	PutAutoscaleState(ctx context.Context, st *AutoscaleState) error
	// DeleteAutoscaleState forgets a pool's state (no-op when absent).
	DeleteAutoscaleState(ctx context.Context, pool string) error
}

// MaxAutoscaleEvaluations is how many evaluations a pool keeps at most:
// a week at the default interval of a minute.
const MaxAutoscaleEvaluations = 10080
