// Command vdibroker is the vdibroker connection broker: the server (serve),
// the host agent (agent), the demo (its fleet is package demo), the
// simulator (sim), the load generators (bench connect, bench heartbeat;
// package loadgen) and the admin commands, in one binary.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/vdibroker/vdibroker"
)

// rootCmd is the top of the command tree. Each subcommand's file adds itself
// in an init function, so commands live in files of their own.
var rootCmd = &cobra.Command{
	Use:           "vdibroker",
	Short:         "Connection broker for virtual desktops",
	SilenceUsage:  true,
	SilenceErrors: true,
}

func main() {
	os.Exit(run(os.Args[1:]))
}

// run executes the command tree with args and returns the exit status: 0 on
// success, 2 for usage errors, 1 for every other error.
func run(args []string) int {
	return execute(rootCmd, args, os.Stderr)
}

// execute runs root with args, prints an error as one "error: ..." line on
// stderr, and returns the exit status. Every command that only groups
// others refuses an unknown subcommand (exit 2) instead of printing its
// help and exiting 0.
func execute(root *cobra.Command, args []string, stderr io.Writer) int {
	groupCommands(root)
	markRunErrors(root)
	if rootHelpAsked(root, args) {
		args = []string{"--help"} // the admin flags before it mean nothing to root's help
	}
	err := unknownRootCommand(root, args)
	if err == nil {
		root.SetArgs(commandFirst(root, args))
		err = root.Execute()
	}
	if err != nil {
		// The message may quote a host, a peer pod or an identity
		// provider: nothing of it acts on the terminal.
		fmt.Fprintln(stderr, "error:", escapeTerminal(err.Error(), "\n")+retryHint(err))
		if isUsageError(err) {
			return 2
		}
		return 1
	}
	return 0
}

// retryHint is " (try again in N s)" for an error whose answer (a 429 or a
// 503) said in its Retry-After when to try again (vhttp's client keeps
// whole seconds 1..3600 of plain digits, nothing else), "" for any other:
// the CLI does not retry on its own, a script reads the line and decides.
// It ends the line on stderr whatever --output is, so stdout stays
// empty, as with every error.
func retryHint(err error) string {
	d := vdibroker.ErrorRetryAfter(err)
	if d <= 0 {
		return ""
	}
	return fmt.Sprintf(" (try again in %d s)", int((d+time.Second-1)/time.Second))
}

// usageError marks errors in how a command was called (exit status 2).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// runError marks an error a command's RunE returned that it did not
// type as a usageError: cobra's own errors come before RunE, so its text
// ("bind: invalid argument", a link-local address without its zone) is
// not matched against theirs. serve, agent and gateway failing to start
// then exit 1, which their units restart, not 2, which they do not
// (RestartPreventExitStatus=2).
type runError struct{ err error }

func (e runError) Error() string { return e.err.Error() }
func (e runError) Unwrap() error { return e.err }

// markRunErrors wraps the RunE of cmd and of its commands, once, so that
// an error they return untyped is a runError.
func markRunErrors(cmd *cobra.Command) {
	for _, sub := range cmd.Commands() {
		markRunErrors(sub)
	}
	if cmd.RunE == nil || cmd.Annotations[runErrorsMarked] != "" {
		return
	}
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[runErrorsMarked] = "true"
	runE := cmd.RunE
	cmd.RunE = func(c *cobra.Command, args []string) error {
		err := runE(c, args)
		if err != nil && !errors.As(err, new(usageError)) {
			return runError{err}
		}
		return err
	}
}

// runErrorsMarked is the annotation markRunErrors leaves on a command it wrapped.
const runErrorsMarked = "vdibroker-run-errors-marked"

func isUsageError(err error) bool {
	if errors.As(err, new(usageError)) {
		return true
	}
	if errors.As(err, new(runError)) {
		return false
	}
	// An answer from the broker is never a usage error, whatever its text.
	if errors.As(err, new(*vdibroker.Error)) {
		return false
	}
	// cobra's own argument and command errors carry no type: match their text.
	msg := err.Error()
	for _, p := range []string{"unknown flag", "unknown command", "unknown shorthand", "invalid argument", "accepts ", "requires at least", "required flag", "flag needs an argument"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}

func init() { configureRoot(rootCmd) }
