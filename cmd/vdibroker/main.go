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
		fmt.Fprintln(stderr, "error:", escapeTerminal(err.Error(), "\n"))
		if isUsageError(err) {
			return 2
		}
		return 1
	}
	return 0
}

// usageError marks errors in how a command was called (exit status 2).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func isUsageError(err error) bool {
	if errors.As(err, new(usageError)) {
		return true
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
