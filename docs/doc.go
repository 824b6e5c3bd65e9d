// Package docs holds vdibroker's documentation (the Markdown files beside
// this one) and no code. Its tests keep the documentation honest: every rule
// id the code cites (R-C1, R-LI6, ...) must be defined in behaviour.md, and
// the bounds the pages state for admins must be the code's constants.
package docs
