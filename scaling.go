package vdibroker

// ScalingStore is the store's part of autoscale (issue 17, SPEC §8):
// scaling plans, the record of every autoscale evaluation, and the lease
// that lets exactly one replica evaluate at a time. Its methods are added
// by the scaling-plan work.
type ScalingStore interface {
}
