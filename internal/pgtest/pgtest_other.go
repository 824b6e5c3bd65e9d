//go:build !unix

package pgtest

import "testing"

// Server is a PostgreSQL server of the test's own; there is none on this
// system (it runs initdb and postgres as the postgres user, and pauses
// them with signals).
type Server struct {
	// DSN connects to the server's postgres database over 127.0.0.1.
	DSN string
}

// Start skips the test: a server of the test's own needs Unix.
func Start(t testing.TB) *Server {
	t.Helper()
	t.Skip("pgtest: a PostgreSQL server of the test's own runs on Unix only")
	return nil
}

// Restart is never reached: Start skipped.
func (s *Server) Restart() {}

// Stop is never reached: Start skipped.
func (s *Server) Stop() {}

// Pause is never reached: Start skipped.
func (s *Server) Pause() {}

// Resume is never reached: Start skipped.
func (s *Server) Resume() {}
