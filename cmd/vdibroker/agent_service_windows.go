//go:build windows

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"github.com/vdibroker/vdibroker/agent"
	"golang.org/x/sys/windows"
	"golang.org/x/sys/windows/svc"
	"golang.org/x/sys/windows/svc/eventlog"
	"golang.org/x/sys/windows/svc/mgr"
)

// installAgentService is `vdibroker agent install`: it checks the flags as
// the agent would, makes the state directory (agent.SecureStateDir), keeps
// the registration token in it, registers the service (automatic start,
// restarts, event log source) and starts it. What it registered is removed
// again when a later step fails.
func installAgentService(o *agentFlags, f *pflag.FlagSet, out io.Writer) (err error) {
	cfg, _, err := o.config()
	if err != nil {
		return err
	}
	cfg.Logger = slog.New(slog.DiscardHandler)
	if _, err := o.newAgent(cfg); err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	if exe, err = filepath.Abs(exe); err != nil {
		return err
	}
	args, err := agentServiceArgs(f, o.stateDir, os.Getenv, filepath.Abs)
	if err != nil {
		return usageError{err}
	}
	m, err := mgr.Connect()
	if err != nil {
		return fmt.Errorf("connect to the service control manager (run as an administrator): %w", err)
	}
	defer m.Disconnect()
	if s, err := m.OpenService(agentServiceName); err == nil {
		s.Close()
		return fmt.Errorf("service %s is installed already; run vdibroker agent uninstall first", agentServiceName)
	}
	if err := agent.SecureStateDir(o.stateDir); err != nil {
		return err
	}
	if cfg.RegistrationToken != "" {
		if err := writeTokenFile(agentTokenPath(o.stateDir), cfg.RegistrationToken); err != nil {
			return err
		}
	}
	s, err := m.CreateService(agentServiceName, exe, mgr.Config{
		DisplayName: agentServiceDisplayName,
		Description: agentServiceDescription,
		StartType:   mgr.StartAutomatic,
	}, args...)
	if err != nil {
		return fmt.Errorf("create service %s: %w", agentServiceName, err)
	}
	defer s.Close()
	defer func() {
		if err != nil {
			s.Delete()
			eventlog.Remove(agentServiceName)
		}
	}()
	actions := make([]mgr.RecoveryAction, len(agentServiceRestarts))
	for i, d := range agentServiceRestarts {
		actions[i] = mgr.RecoveryAction{Type: mgr.ServiceRestart, Delay: d}
	}
	if err := s.SetRecoveryActions(actions, uint32(agentServiceResetPeriod/time.Second)); err != nil {
		return fmt.Errorf("service %s recovery actions: %w", agentServiceName, err)
	}
	if err := eventlog.InstallAsEventCreate(agentServiceName, eventlog.Error|eventlog.Warning|eventlog.Info); err != nil &&
		!strings.Contains(err.Error(), "exists") {
		return fmt.Errorf("event log source %s: %w", agentServiceName, err)
	}
	if err := s.Start(); err != nil {
		return fmt.Errorf("start service %s: %w", agentServiceName, err)
	}
	if err := waitServiceState(s, svc.Running); err != nil {
		return fmt.Errorf("service %s did not start (see the Application event log, source %s): %w", agentServiceName, agentServiceName, err)
	}
	if w := agentExeWarning(exe, os.Getenv); w != "" {
		fmt.Fprintln(out, w)
	}
	fmt.Fprintf(out, "service %s installed and running: %s %s\nstate directory %s (SYSTEM and Administrators only); events in the Application log, source %s\n",
		agentServiceName, exe, strings.Join(args, " "), o.stateDir, agentServiceName)
	return nil
}

// writeTokenFile writes the token into the state directory, replaced
// atomically, with agent.StateFileSDDL from its first byte (LocalSystem
// and Administrators only), not relying on the directory's entries.
func writeTokenFile(path, token string) error {
	if err := agent.WriteSecretFile(path, []byte(token+"\n")); err != nil {
		return fmt.Errorf("registration token file: %w", err)
	}
	return nil
}

// uninstallAgentService is `vdibroker agent uninstall`: stop the service
// (the agent sends its last heartbeat), remove it and its event log
// source. The state directory stays: a new install reuses the credential.
func uninstallAgentService(out io.Writer) error {
	m, err := mgr.Connect()
	if err != nil {
		return fmt.Errorf("connect to the service control manager (run as an administrator): %w", err)
	}
	defer m.Disconnect()
	s, err := m.OpenService(agentServiceName)
	if err != nil {
		return fmt.Errorf("service %s: %w", agentServiceName, err)
	}
	defer s.Close()
	if st, err := s.Query(); err == nil && st.State != svc.Stopped {
		if _, err := s.Control(svc.Stop); err != nil && !errors.Is(err, windows.ERROR_SERVICE_NOT_ACTIVE) {
			return fmt.Errorf("stop service %s: %w", agentServiceName, err)
		}
		if err := waitServiceState(s, svc.Stopped); err != nil {
			return fmt.Errorf("stop service %s: %w", agentServiceName, err)
		}
	}
	if err := s.Delete(); err != nil {
		return fmt.Errorf("delete service %s: %w", agentServiceName, err)
	}
	if err := eventlog.Remove(agentServiceName); err != nil {
		fmt.Fprintf(out, "event log source %s not removed: %v\n", agentServiceName, err)
	}
	fmt.Fprintf(out, "service %s stopped and removed; its state directory stays (delete it to forget the host credential)\n", agentServiceName)
	return nil
}

// waitServiceState polls the service until it is in state, for at most
// agentServiceStateWait.
func waitServiceState(s *mgr.Service, state svc.State) error {
	deadline := time.Now().Add(agentServiceStateWait)
	for {
		st, err := s.Query()
		if err != nil {
			return err
		}
		if st.State == state {
			return nil
		}
		if state == svc.Running && st.State == svc.Stopped {
			return fmt.Errorf("it stopped (exit code %d, service exit code %d)", st.Win32ExitCode, st.ServiceSpecificExitCode)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("still in state %d after %s", st.State, agentServiceStateWait)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// runAgentService runs the agent as the service control manager's service:
// logging to the event log, stopped by the SCM's Stop or Shutdown.
func runAgentService(o *agentFlags, cfg agent.Config, level slog.Level) error {
	elog, err := eventlog.Open(agentServiceName)
	if err != nil {
		return fmt.Errorf("event log source %s: %w", agentServiceName, err)
	}
	defer elog.Close()
	cfg.Logger = slog.New(newEventLogHandler(elog, level))
	o.logLevelRefused(cfg.Logger, level)
	a, err := o.newAgent(cfg)
	if err != nil {
		elog.Error(eventIDError, "agent not started: "+err.Error())
		return err
	}
	return svc.Run(agentServiceName, &agentService{run: a.Run, log: cfg.Logger})
}

// agentService is the agent as a svc.Handler.
type agentService struct {
	run func(context.Context) error
	log *slog.Logger
}

// Execute implements svc.Handler: the agent runs until the SCM asks the
// service to stop or the system shuts down; then its context ends and it
// sends its last heartbeat (R-H1 Shutdown, at most 5 s) before the service
// reports Stopped. An agent that stops by itself (the broker refused its
// credential and token) stops the service with exit code 1.
func (s *agentService) Execute(args []string, r <-chan svc.ChangeRequest, changes chan<- svc.Status) (bool, uint32) {
	changes <- svc.Status{State: svc.StartPending}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.run(ctx) }()
	changes <- svc.Status{State: svc.Running, Accepts: svc.AcceptStop | svc.AcceptShutdown}
	for {
		select {
		case err := <-done:
			if err != nil {
				s.log.Error("agent stopped", "err", err)
				return true, 1
			}
			return false, 0
		case c := <-r:
			switch c.Cmd {
			case svc.Interrogate:
				changes <- c.CurrentStatus
			case svc.Stop, svc.Shutdown:
				changes <- svc.Status{State: svc.StopPending, WaitHint: 10000}
				s.log.Info("stopping: the service control manager asked", "command", c.Cmd)
				cancel()
				if err := <-done; err != nil {
					s.log.Error("agent stopped", "err", err)
				}
				return false, 0
			}
		}
	}
}
