// Package placement decides which session host of a pool gets a user's
// session (SPEC §4, §6): the common rules R-C1..R-C5 and R-C8, BreadthFirst,
// DepthFirst, LoadIndex (Horizon RDS farm) and the personal pools'
// Persistent and MultiplePersistent, each decision with an Explain record
// (R-C7). It does no I/O: the server, the simulator and the tests drive the
// same code. New returns the indexed engine; NewReference the plain
// implementation it is checked against. Describe and WriteText say an
// Explain record in words, the one wording the console and the CLI share.
// See README.md for the pipeline.
package placement
