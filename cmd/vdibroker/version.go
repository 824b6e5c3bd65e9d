package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/vdibroker/vdibroker/store"
)

func init() { rootCmd.AddCommand(newVersionCmd()) }

// version is the release, set at build time with
// -ldflags "-X main.version=v1.2.3"; empty: the module's version from the
// build info (a pseudo-version for a build from a git checkout), "(devel)"
// when the build stamped none (-buildvcs=false).
var version string

// newVersionCmd is `vdibroker version`: which release this binary is and
// the newest schema version it migrates a database to, the numbers an
// upgrade, a rollback and a restore are told apart by (docs/operations.md,
// "Upgrades and the schema version").
func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print this binary's release, commit and the newest database schema version it knows",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			w := cmd.OutOrStdout()
			v, commit := version, ""
			if bi, ok := debug.ReadBuildInfo(); ok {
				if v == "" {
					v = bi.Main.Version
				}
				var rev, at, modified string
				for _, s := range bi.Settings {
					switch s.Key {
					case "vcs.revision":
						rev = s.Value
					case "vcs.time":
						at = s.Value
					case "vcs.modified":
						modified = s.Value
					}
				}
				if rev != "" {
					commit = rev
					if at != "" {
						commit += " (" + at + ")"
					}
					if modified == "true" {
						commit += ", modified"
					}
				}
			}
			if v == "" {
				v = "(devel)"
			}
			fmt.Fprintf(w, "vdibroker %s\n", v)
			if commit != "" {
				fmt.Fprintf(w, "commit    %s\n", commit)
			}
			fmt.Fprintf(w, "go        %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
			for _, d := range []string{"sqlite", "postgres"} {
				n, err := store.NewestSchemaVersion(d)
				if err != nil {
					return err
				}
				fmt.Fprintf(w, "schema    %s %d\n", d, n)
			}
			return nil
		},
	}
}
