package vdibroker

import (
	"context"
	"errors"
	"time"
)

// ErrStoreWrite marks a store error that says the database cannot write
// (R-OUT1): its disk is full, read-only or failing (SQLite's SQLITE_FULL,
// SQLITE_READONLY, SQLITE_IOERR; PostgreSQL's disk_full, io_error,
// read_only_sql_transaction). The broker counts it as an outage at once,
// without the ping that confirms other failures: reads may well go on
// working while no write can land.
var ErrStoreWrite = errors.New("the database cannot write")

// EndOutagePlacementWritten ends the record of a session a host reported
// and the broker adopted (R-S2) when it is the logon of a session a
// replica placed during an outage: the placement's own record, with its
// decision record, replaces it (R-OUT3).
const EndOutagePlacementWritten = "OutagePlacementWritten"

// Escrow is one replica's reserved share of one host's free slots, held
// while the store is up so that the replica may place new sessions there
// during an outage (serve --outage-placement). Every replica's
// normal placement counts the escrows of the others against the host's
// maxSessionLimit (docs/behaviour.md R-OUT2).
type Escrow struct {
	Replica  string    `json:"replica"`
	HostPool string    `json:"hostPool"`
	Host     string    `json:"host"`
	Slots    int       `json:"slots"`
	Expire   time.Time `json:"expireTime"`
}

// EscrowStore keeps the replicas' escrows (R-OUT2).
type EscrowStore interface {
	// PutEscrows replaces replica's escrows with want (an empty want
	// returns them all) and returns what was granted: each host's slots
	// trimmed, in the same transaction, to what its maxSessionLimit leaves
	// after its open sessions and the unexpired escrows of the other
	// replicas; hosts with nothing left are absent. Expired escrows of
	// every replica are deleted on the way.
	PutEscrows(ctx context.Context, replica string, want []Escrow, now time.Time) ([]Escrow, error)
	// ListEscrows returns the pool's escrows unexpired at now, of every
	// replica, by host then replica.
	ListEscrows(ctx context.Context, pool string, now time.Time) ([]Escrow, error)
}
