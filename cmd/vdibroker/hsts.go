package main

import (
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

const (
	// defaultHSTSMaxAge is a year: long enough that a browser which
	// came once keeps to HTTPS between visits, the usual floor of
	// browsers' preload lists.
	defaultHSTSMaxAge = 365 * 24 * time.Hour
	// maxHSTSMaxAge bounds --hsts-max-age at two years.
	maxHSTSMaxAge = 2 * 365 * 24 * time.Hour
)

// strictTransport adds Strict-Transport-Security (RFC 6797) to every
// answer over the broker's own TLS, so that a browser which signed in
// once is not talked into plain HTTP afterwards (a network that strips
// TLS then gets nothing, not her session cookie or a sign-in form it
// rewrote). The header is ignored by browsers over plain HTTP and for IP
// addresses; it is left off for localhost names too: browsers pin the
// whole host name, every port, and a developer's other services on
// http://localhost would then stop loading. No includeSubDomains: the
// broker speaks only for its own name.
func strictTransport(next http.Handler, maxAge time.Duration) http.Handler {
	if maxAge <= 0 {
		return next
	}
	value := "max-age=" + strconv.FormatInt(int64(maxAge/time.Second), 10)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS != nil && !isLocalhostName(r.Host) {
			w.Header().Set("Strict-Transport-Security", value)
		}
		next.ServeHTTP(w, r)
	})
}

// isLocalhostName reports whether a request's Host names localhost or a
// name under .localhost (RFC 6761), with or without a port.
func isLocalhostName(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	return host == "localhost" || strings.HasSuffix(host, ".localhost")
}
