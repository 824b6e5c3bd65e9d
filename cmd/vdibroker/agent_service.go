package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// The Windows service of the agent: `vdibroker agent install|uninstall`.
// What it is made of (its name, command line, restarts, state directory)
// is decided here, without a build tag, so that it is tested on every
// system; agent_service_windows.go talks to the service control manager.

const (
	agentServiceName        = "vdibroker-agent"
	agentServiceDisplayName = "vdibroker agent"
	agentServiceDescription = "Registers this session host with the vdibroker connection broker, reports its load and user sessions, and carries out the broker's logoff, disconnect and message commands."
	// agentTokenFile is the registration token's file in the state
	// directory: a service's command line is readable by every user
	// (sc qc), the state directory only by SYSTEM and Administrators.
	agentTokenFile = "registration-token"
	// agentServiceStateWait bounds install's and uninstall's waits for the
	// service to run or stop; stopping takes the agent's last heartbeat,
	// at most 5 s.
	agentServiceStateWait = 30 * time.Second
)

// agentServiceRestarts are the service's recovery actions: restart after
// 5 s, 30 s, then every minute, the count reset after a day without a
// failure. They apply when the process dies (a crash); an agent that
// stops by itself because the broker refused its credential and token
// stops with an error in the event log, since restarting cannot help.
var agentServiceRestarts = []time.Duration{5 * time.Second, 30 * time.Second, time.Minute}

const agentServiceResetPeriod = 24 * time.Hour

// Event log event ids, one per level (the EventCreate message file shows the
// message as is).
const (
	eventIDInfo    = 1
	eventIDWarning = 2
	eventIDError   = 3
)

// defaultAgentStateDir is --state-dir's default: %ProgramData%\vdibroker on
// Windows, /var/lib/vdibroker-agent elsewhere.
func defaultAgentStateDir(goos string, getenv func(string) string) string {
	if goos != "windows" {
		return "/var/lib/vdibroker-agent"
	}
	pd := getenv("ProgramData")
	if pd == "" {
		pd = `C:\ProgramData`
	}
	return strings.TrimRight(pd, `\`) + `\vdibroker`
}

// agentExeWarning is install's warning when the program is not where only
// administrators can write by default (%ProgramFiles%, %SystemRoot%): the
// service runs it as LocalSystem, so whoever can replace it can run
// anything so. Empty when it is there.
func agentExeWarning(exe string, getenv func(string) string) string {
	for _, dir := range []string{getenv("ProgramFiles"), getenv("ProgramFiles(x86)"), getenv("SystemRoot")} {
		if dir != "" && strings.HasPrefix(strings.ToLower(exe), strings.ToLower(strings.TrimRight(dir, `\`)+`\`)) {
			return ""
		}
	}
	return "warning: " + exe + " is not under %ProgramFiles%: the service runs it as LocalSystem, so make sure only administrators can change it and its folder"
}

// agentTokenPath is the registration token's file in stateDir.
func agentTokenPath(stateDir string) string {
	return strings.TrimRight(stateDir, `\`) + `\` + agentTokenFile
}

// agentPathFlags are the agent flags that name files: the service starts in
// %SystemRoot%\System32, so install makes them absolute.
var agentPathFlags = map[string]bool{"custom-script": true, "policy-file": true, "ca-file": true, "client-cert": true, "client-key": true}

// agentInstallOnlyFlags are the flags install does not pass on: the token
// (it goes to agentTokenFile), the state directory and the token file
// (always named), and the service switch (always set).
var agentInstallOnlyFlags = map[string]bool{"registration-token": true, "registration-token-file": true, "state-dir": true, "windows-service": true}

// agentServiceArgs is the command line of the service, after the program:
// `agent --windows-service`, the state directory and the token file in
// it, and every agent flag install was given (f's changed flags) as
// --name=value, file paths made absolute with abs. --server comes from
// VDIBROKER_SERVER when it was not given: the service has not install's
// environment.
func agentServiceArgs(f *pflag.FlagSet, stateDir string, getenv func(string) string, abs func(string) (string, error)) ([]string, error) {
	args := []string{"agent", "--windows-service", "--state-dir=" + stateDir,
		"--registration-token-file=" + agentTokenPath(stateDir)}
	if !f.Changed("server") && getenv("VDIBROKER_SERVER") != "" {
		args = append(args, "--server="+getenv("VDIBROKER_SERVER"))
	}
	var err error
	f.Visit(func(fl *pflag.Flag) {
		if err != nil || agentInstallOnlyFlags[fl.Name] {
			return
		}
		v := fl.Value.String()
		if sv, ok := fl.Value.(pflag.SliceValue); ok {
			v = strings.Join(sv.GetSlice(), ",")
		}
		switch {
		case agentPathFlags[fl.Name] && v != "":
			v, err = abs(v)
		case fl.Name == "sessions-provider" && strings.HasPrefix(v, "file:"):
			var p string
			p, err = abs(strings.TrimPrefix(v, "file:"))
			v = "file:" + p
		}
		if err != nil {
			err = fmt.Errorf("--%s: %w", fl.Name, err)
			return
		}
		args = append(args, "--"+fl.Name+"="+v)
	})
	if err != nil {
		return nil, err
	}
	return args, nil
}

func newAgentInstallCmd() *cobra.Command {
	var o agentFlags
	c := &cobra.Command{
		Use:   "install",
		Short: "Windows: install and start the agent as a service with these flags",
		Long: `Install the agent as the Windows service "vdibroker-agent" (run it as an
administrator): started at boot as LocalSystem, restarted if it crashes,
stopped cleanly (its last heartbeat marks the host Shutdown), logging to the
Application event log (source vdibroker-agent). It takes the agent's flags
and runs the agent with them; the registration token goes to a file in the
state directory (default %ProgramData%\vdibroker), which only SYSTEM and
Administrators can read. Then it starts the service.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return installAgentService(&o, cmd.Flags(), cmd.OutOrStdout())
		},
	}
	o.register(c.Flags())
	return c
}

func newAgentUninstallCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "uninstall",
		Short: "Windows: stop and remove the agent's service (the state directory stays)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return uninstallAgentService(cmd.OutOrStdout())
		},
	}
	return c
}
