package http

// HeartbeatBuckets is how many heartbeat rate buckets s holds (R-SEC).
func HeartbeatBuckets(s *Server) int { return s.heartbeats.Len() }
