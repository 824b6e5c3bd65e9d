// Package console is the broker's web console: server-rendered pages (Go
// html/template, embedded templates and static files, charts drawn as inline
// SVG on the server, a few lines of plain JavaScript that refresh the live
// parts of a page by polling). No front-end build step, so `go build` and
// `go install` keep working.
//
// The console holds no privileges of its own. A user signs in with an API
// token; every read and change is sent to the broker's own HTTP API (the
// handler given as Config.API, called in-process) with that token, so the
// API server enforces roles (a Reader changes nothing, R-SEC) and validates
// input (R-P4) exactly as for any other client. The token is kept in the
// database, sealed under the session's cookie (package websession), so
// every replica serves every sign-in; the browser holds only a random
// session id in an HttpOnly SameSite=Lax cookie, and every change carries
// a CSRF token checked against the session and a same-origin Origin.
// Single sign-on is identity.Flow, mounted at /signin/oidc (oidc.go).
package console
