package docs

import _ "embed"

// Behaviour is behaviour.md, the reference the rule ids (R-C1, R-LI3, ...)
// point at; the web console serves it so that every rule id it shows is a
// link that works without leaving the broker.
//
//go:embed behaviour.md
var Behaviour string
