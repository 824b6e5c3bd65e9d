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

// warnEnvOverridden logs envOverridden's variables, if any.
func warnEnvOverridden(cmd *cobra.Command, fromEnv []string, log *slog.Logger) {
	if names := envOverridden(cmd, fromEnv); len(names) > 0 {
		log.Warn("environment variables ignored: the same flags are given on the command line, which wins", "variables", names)
	}
}

// envFlagsHelp is the paragraph the help of serve, agent and gateway end with.
const envFlagsHelp = `
Every flag may also be given in the environment as VDIBROKER_<FLAG>, upper
case with "_" for "-" (--tls-cert is VDIBROKER_TLS_CERT); the command line
wins. The systemd units in deploy/ keep their settings that way, in an
EnvironmentFile.`
