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

// ScalingPlan is an autoscale plan for pooled host pools (issue 17, SPEC
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

// ScalingStore is the store's part of scaling plans (issue 17, SPEC §8).
type ScalingStore interface {
	// PutScalingPlan creates (created=true) or replaces a plan; CreateTime
	// is kept on replace. A pool is in at most one plan: naming a pool of
	// another plan is refused with Conflict on field hostPools.
	PutScalingPlan(ctx context.Context, p *ScalingPlan) (created bool, err error)
	GetScalingPlan(ctx context.Context, name string) (*ScalingPlan, error)
	// ListScalingPlans lists plans by name.
	ListScalingPlans(ctx context.Context) ([]*ScalingPlan, error)
	DeleteScalingPlan(ctx context.Context, name string) error
	// ScalingPlanForPool returns the plan that names the pool; NotFound
	// when none does.
	ScalingPlanForPool(ctx context.Context, pool string) (*ScalingPlan, error)
}

// AutoscaleStore is the store's part of the autoscaler (issue 17): the
// record of every evaluation and the lease that lets exactly one replica
// evaluate at a time. Its methods are added by the autoscaler work.
type AutoscaleStore interface {
}
