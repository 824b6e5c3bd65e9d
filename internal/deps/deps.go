//go:build tools

// Package deps pins the project's third-party modules while the packages that
// use them are being written, so that parallel work shares one go.mod.
package deps

import (
	_ "github.com/chromedp/chromedp"
	_ "github.com/goccy/go-yaml"
	_ "github.com/google/go-cmp/cmp"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "github.com/jmespath/go-jmespath"
	_ "github.com/pressly/goose/v3"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/shirou/gopsutil/v4/cpu"
	_ "github.com/spf13/cobra"
	_ "gonum.org/v1/plot"
	_ "modernc.org/sqlite"
	_ "pgregory.net/rapid"
)
