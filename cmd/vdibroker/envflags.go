package main

import (
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// The long-running commands (serve, agent, gateway) take every flag also from the
// environment, as VDIBROKER_ and the flag's name in upper case with "_"
// for "-" (--tls-cert is VDIBROKER_TLS_CERT): a systemd unit then keeps its
// optional settings in an EnvironmentFile, and secrets such as a database
// URL with its password stay out of the command line, which `ps` shows to
// every user. A flag given on the command line wins over the environment.

// envName is the environment variable of flag name.
func envName(flag string) string {
	return "VDIBROKER_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// flagsFromEnv sets each flag of cmd not given on the command line from
// its environment variable, when that is set and not empty. It returns the
// names of the flags it set; a value the flag refuses is a usage error
// naming the variable.
func flagsFromEnv(cmd *cobra.Command) ([]string, error) {
	var set []string
	var err error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if err != nil || f.Changed || f.Name == "help" {
			return
		}
		v, ok := os.LookupEnv(envName(f.Name))
		if !ok || v == "" {
			return
		}
		if e := cmd.Flags().Set(f.Name, v); e != nil {
			err = usageError{fmt.Errorf("%s: %w", envName(f.Name), e)}
			return
		}
		set = append(set, f.Name)
	})
	return set, err
}

// runWithEnvFlags is the RunE of a command that takes its flags also
// from the environment: it sets them (flagsFromEnv), runs run with the
// names of those it set, and names in run's error each such flag as its
// variable (envNamed), so a value broker.env gave that a range check
// refuses says where it came from.
func runWithEnvFlags(run func(cmd *cobra.Command, fromEnv []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, _ []string) error {
		fromEnv, err := flagsFromEnv(cmd)
		if err != nil {
			return err
		}
		return envNamed(run(cmd, fromEnv), fromEnv)
	}
}

// envNamedError is an error whose text names the variables of the flags
// it names; it wraps the original, so its type (usageError, a store's
// error) still decides the exit status.
type envNamedError struct {
	msg string
	err error
}

func (e envNamedError) Error() string { return e.msg }
func (e envNamedError) Unwrap() error { return e.err }

// envNamed rewrites err's text so that the first mention of each flag of
// fromEnv ("--log-level: want ...") is its variable with the flag after
// it ("VDIBROKER_LOG_LEVEL (--log-level): want ..."), the form a value
// the flag itself refuses already has: an administrator whose broker.env
// holds the value never typed the flag. A message that already names the
// variable is left as it is for that flag.
func envNamed(err error, fromEnv []string) error {
	if err == nil || len(fromEnv) == 0 {
		return err
	}
	msg := err.Error()
	for _, name := range fromEnv {
		if varMention(msg, envName(name)) {
			continue
		}
		if i := flagMention(msg, name); i >= 0 {
			flag := "--" + name
			msg = msg[:i] + envName(name) + " (" + flag + ")" + msg[i+len(flag):]
		}
	}
	if msg == err.Error() {
		return err
	}
	return envNamedError{msg, err}
}

// varMention tells whether msg names the variable v as a whole, not
// only as the start of a longer one's (VDIBROKER_DATABASE in
// VDIBROKER_DATABASE_FILE): such a message names the other flag's
// variable, and the flag of v is still to be named.
func varMention(msg, v string) bool {
	return wholeIndex(msg, v, func(b byte) bool { return b == '_' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' }) >= 0
}

// flagMention is the index of the first "--name" in msg that is the
// whole flag (not --name-file nor --other-name), or -1.
func flagMention(msg, name string) int {
	return wholeIndex(msg, "--"+name, func(b byte) bool { return b == '-' || b >= 'a' && b <= 'z' || b >= '0' && b <= '9' })
}

// wholeIndex is the index of the first word in msg, or -1: an occurrence
// with no byte of the word's kind (in) just before or after it.
func wholeIndex(msg, word string, in func(byte) bool) int {
	for off := 0; ; {
		i := strings.Index(msg[off:], word)
		if i < 0 {
			return -1
		}
		i += off
		end := i + len(word)
		if (i == 0 || !in(msg[i-1])) && (end == len(msg) || !in(msg[end])) {
			return i
		}
		off = i + 1
	}
}

// envOverridden names the environment variables set, not empty, for flags
// also given on the command line with another value: the command line
// wins, and an administrator who moved a setting into the unit's
// EnvironmentFile (say VDIBROKER_DATA_DIR) while the unit's command line
// still gives it would otherwise see the file's value silently ignored.
// fromEnv are the flags flagsFromEnv set (changed, but by the
// environment, not the command line). Values are compared as the flag
// reads them (sameFlagValue), so "1m" is "1m0s" and "a,b" is [a,b]. Only
// the names are returned: a value may be a secret.
func envOverridden(cmd *cobra.Command, fromEnv []string) []string {
	var names []string
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if slices.Contains(fromEnv, f.Name) {
			return
		}
		if v, ok := os.LookupEnv(envName(f.Name)); ok && v != "" && !sameFlagValue(f, v) {
			names = append(names, envName(f.Name))
		}
	})
	return names
}

// sameFlagValue tells whether text, set on a fresh flag of f's type, reads
// as f's value does: a boolean, duration, number or list is compared as
// parsed ("1" is true, "1m" is 1m0s, "a,b" is [a,b]); any other type, and
// text such a flag refuses, by the text itself.
func sameFlagValue(f *pflag.Flag, text string) bool {
	fs := pflag.NewFlagSet("env", pflag.ContinueOnError)
	switch f.Value.Type() {
	case "bool":
		fs.Bool("v", false, "")
	case "duration":
		fs.Duration("v", 0, "")
	case "int":
		fs.Int("v", 0, "")
	case "float64":
		fs.Float64("v", 0, "")
	case "stringSlice":
		fs.StringSlice("v", nil, "")
	default:
		return text == f.Value.String()
	}
	if fs.Set("v", text) != nil {
		return text == f.Value.String()
	}
	return fs.Lookup("v").Value.String() == f.Value.String()
}

// warnEnvOverridden logs envOverridden's variables, if any, and
// envMisspelt's.
func warnEnvOverridden(cmd *cobra.Command, fromEnv []string, log *slog.Logger) {
	if names := envOverridden(cmd, fromEnv); len(names) > 0 {
		log.Warn("environment variables ignored: the same flags are given on the command line, which wins", "variables", names)
	}
	for _, m := range envMisspelt(cmd, os.Environ()) {
		log.Warn("environment variable ignored: it names no flag of this command", "variable", m.name, "didYouMean", m.near)
	}
}

// envNotFlags are the VDIBROKER_ variables read other than as a flag of
// serve, agent or gateway: the admin token, the units' extra arguments,
// the admin CLI's server and token (exported in the same shell as a
// broker started by hand), and the tests' and benchmarks' switches.
var envNotFlags = []string{"ADMIN_TOKEN", "SERVE_ARGS", "AGENT_ARGS", "SERVER", "TOKEN"}

// envNotFlagPrefixes are the families of such variables.
var envNotFlagPrefixes = []string{"TEST_", "BENCH_", "STORE_CRASH_"}

// misspelt is a VDIBROKER_ variable that names no flag, and the flag
// variables near it.
type misspelt struct {
	name string
	near []string
}

// envMisspelt finds, in environ (os.Environ's form), the VDIBROKER_
// variables that are no flag of cmd but within two edits of one's
// (VDIBROKER_LISTN, VDIBROKER_METRICS_TOKEN_FLE): such a line of the
// unit's EnvironmentFile is silently no setting at all, and a broker
// left serving /metrics without its token, or pruning at the default
// retention, says nothing of it. Variables far from every flag's are
// left alone: the environment also holds other programs' and the CLI's.
// A variable that is a flag's but for its _FILE (VDIBROKER_METRICS_TOKEN,
// VDIBROKER_OIDC_CLIENT_SECRET) is reported too, however far: a secret
// such a flag reads from a file, given in the environment itself, is no
// setting either, and /metrics then stays open (R-SEC).
// The values are never read: one may be a secret.
func envMisspelt(cmd *cobra.Command, environ []string) []misspelt {
	var flagVars []string
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Name != "help" {
			flagVars = append(flagVars, envName(f.Name))
		}
	})
	var out []misspelt
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		rest, ok := strings.CutPrefix(name, "VDIBROKER_")
		if !ok || slices.Contains(flagVars, name) || slices.Contains(envNotFlags, rest) {
			continue
		}
		if slices.ContainsFunc(envNotFlagPrefixes, func(p string) bool { return strings.HasPrefix(rest, p) }) {
			continue
		}
		var near []string
		for _, fv := range flagVars {
			if levenshtein(name, fv) <= 2 || fv == name+"_FILE" {
				near = append(near, fv)
			}
		}
		if len(near) > 0 {
			out = append(out, misspelt{name, near})
		}
	}
	slices.SortFunc(out, func(a, b misspelt) int { return strings.Compare(a.name, b.name) })
	return out
}

// envFlagsHelp is the paragraph the help of serve, agent and gateway end with.
const envFlagsHelp = `
Every flag may also be given in the environment as VDIBROKER_<FLAG>, upper
case with "_" for "-" (--tls-cert is VDIBROKER_TLS_CERT); the command line
wins. The systemd units in deploy/ keep their settings that way, in an
EnvironmentFile.`
