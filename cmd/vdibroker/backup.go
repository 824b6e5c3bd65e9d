package main

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/vdibroker/vdibroker/store"
)

func init() { rootCmd.AddCommand(newBackupCmd(), newRestoreCmd()) }

// newBackupCmd is `vdibroker backup`: a consistent copy of the embedded
// store, taken while serve runs (docs/operations.md).
func newBackupCmd() *cobra.Command {
	var dataDir, output string
	cmd := &cobra.Command{
		Use:   "backup --data-dir DIR --output FILE",
		Short: "Copy the embedded SQLite store, consistently, while serve runs",
		Long: `backup writes a consistent copy of the embedded SQLite store of --data-dir
to --output (a new file, mode 0600; on Windows with a DACL of its own, the
account's, SYSTEM's and Administrators'), while vdibroker serve may be running
on it: SQLite's VACUUM INTO copies one snapshot of the database, every
commit up to that instant and none after it, and serve goes on meanwhile.
The copy is checked (integrity check, schema version) before it is renamed
into place. Put it back with vdibroker restore (serve stopped).

admin.token is a file of its own in the data dir: keep a copy of it with
the backup, or set VDIBROKER_ADMIN_TOKEN. A PostgreSQL database is backed
up with pg_dump (docs/operations.md).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if w := defaultedDataDir(cmd, &dataDir); w != "" {
				fmt.Fprintln(cmd.ErrOrStderr(), "warning:", w)
			}
			info, err := store.BackupSQLite(cmd.Context(), dataDir, output)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "backup of %s written to %s: %s\n", dataDir, output, info)
			return nil
		},
	}
	addDataDirFlag(cmd, &dataDir, "data dir of the store to back up (serve's --data-dir)")
	cmd.Flags().StringVar(&output, "output", "", "file to write the backup to; must not exist")
	requireFlags(cmd, "output")
	return cmd
}

// newRestoreCmd is `vdibroker restore`: the backup becomes the store of a
// data dir whose serve is stopped.
func newRestoreCmd() *cobra.Command {
	var dataDir, input string
	cmd := &cobra.Command{
		Use:   "restore --data-dir DIR --input FILE",
		Short: "Make a backup the embedded store of a data dir (serve stopped)",
		Long: `restore checks the backup --input (integrity, a schema version this
vdibroker knows) and makes it the store of --data-dir. serve must be
stopped: restore takes the data dir's lock, as serve does, and refuses
while another process holds it. The store files it replaces (vdibroker.db
and its -wal and -shm) are moved aside to <name>.before-restore-<time>,
not deleted (-2, -3, ... added when a restore in the same second
took the name). Then start serve on the data dir. The data dir's access is
read as serve reads it at start: on Windows an empty one that lets others
read the files made in it is made private, saying so, and one holding other
files but no store is refused.

The store comes back as the backup has it, credentials too: restore warns
about each API token and registration token revoked since the backup
(valid again) or issued since (gone), each session host deleted since
(back), registered since (gone), or whose credential was reset or renewed
since (its agent's credential is refused), and each RD gateway signing
key dropped since (trusted again), and says what to do.

Console and portal sign-ins do not come back: restore ends every one the
backup holds (one signed out since the backup would otherwise be valid
again, its cookie with it), so everyone signs in again.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if w := defaultedDataDir(cmd, &dataDir); w != "" {
				fmt.Fprintln(cmd.ErrOrStderr(), "warning:", w)
			}
			if err := store.MkdirDataDir(dataDir); err != nil {
				return err
			}
			unlock, err := lockDataDir(dataDir)
			var busy *dataDirBusyError
			if errors.As(err, &busy) {
				// Restoring into another dir would leave the running
				// broker's store as it is: it must stop.
				return fmt.Errorf("restore: a broker is running on data dir %s%s: stop it first (systemctl stop vdibroker), then restore, then start it", dataDir, busy.holder())
			}
			if err != nil {
				return err
			}
			defer unlock()
			// A data dir made by hand for the store is made private as
			// serve makes it for a new store, saying so (R-SEC).
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			if err := store.CheckDataDirAccess(dataDir, log); err != nil {
				return fmt.Errorf("restore: %w", err)
			}
			now := time.Now()
			// What the restore undoes among credentials, read before the
			// store is moved aside; a store that cannot be read does not
			// stop the restore (it may be why she restores).
			changes, cmpErr := store.CompareCredentials(cmd.Context(), dataDir, input, now)
			info, moved, err := store.RestoreSQLite(cmd.Context(), dataDir, input, now)
			for _, m := range moved {
				fmt.Fprintf(cmd.OutOrStdout(), "moved aside: %s\n", m)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "restored %s into %s: %s\n", input, dataDir, info)
			// A sign-out since the backup is not in it: its cookie
			// would work again (R-SEC).
			fmt.Fprintf(cmd.OutOrStdout(), "ended the backup's console and portal sign-ins (%d): everyone signs in again\n", info.SignInsEnded)
			if cmpErr != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: could not tell which credentials the restore brings back or drops (%v): check tokens and hosts revoked or issued since the backup\n", cmpErr)
				return nil
			}
			for _, w := range changes.Warnings() {
				fmt.Fprintln(cmd.ErrOrStderr(), "warning:", escapeTerminal(w, ""))
			}
			return nil
		},
	}
	addDataDirFlag(cmd, &dataDir, "data dir to restore into (serve's --data-dir)")
	cmd.Flags().StringVar(&input, "input", "", "the backup file (from vdibroker backup)")
	requireFlags(cmd, "input")
	return cmd
}
