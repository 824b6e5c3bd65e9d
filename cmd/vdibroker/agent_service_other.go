//go:build !windows

package main

import (
	"errors"
	"io"
	"log/slog"

	"github.com/spf13/pflag"
	"github.com/vdibroker/vdibroker/agent"
)

var errWindowsOnly = errors.New("the agent's service is Windows only; on Linux install deploy/vdibroker-agent.service (docs/agent.md)")

func installAgentService(*agentFlags, *pflag.FlagSet, io.Writer) error { return errWindowsOnly }

func uninstallAgentService(io.Writer) error { return errWindowsOnly }

func runAgentService(*agentFlags, agent.Config, slog.Level) error {
	return usageError{errors.New("--windows-service: " + errWindowsOnly.Error())}
}
