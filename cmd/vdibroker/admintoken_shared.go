package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/vdibroker/vdibroker"
)

// adminCredential settles the one admin token every replica accepts
// (R-SEC): its hash is in the database, which every replica reads. It
// returns the token when this replica knows it ("" when it knows only the
// hash) and the hash.
//
//   - VDIBROKER_ADMIN_TOKEN, when set, is the admin token: its hash
//     replaces the stored one (give every replica the same).
//   - On SQLite (shared false: one broker per database) admin.token in
//     the data dir is the token, made on first start as before.
//   - On PostgreSQL, a replica with an admin.token stores its hash unless
//     one is stored (a different stored one wins, and the file is said to
//     be stale); a replica without one uses the stored hash, or, when
//     none is stored, makes a token, writes its admin.token and stores
//     the hash, unless another replica was quicker (then its file goes
//     and the other's hash is used).
func adminCredential(ctx context.Context, st vdibroker.SharedStore, dataDir string, shared bool, log *slog.Logger) (token, hash string, err error) {
	const name = vdibroker.SharedAdminTokenHash
	path := filepath.Join(dataDir, "admin.token")
	env := strings.TrimSpace(os.Getenv("VDIBROKER_ADMIN_TOKEN")) != ""
	_, statErr := os.Stat(path)
	if shared && !env && statErr != nil {
		stored, err := st.SharedValue(ctx, name)
		if err == nil {
			return "", stored, nil
		}
		if vdibroker.ErrorCode(err) != vdibroker.ENotFound {
			return "", "", err
		}
	}
	if token, err = adminToken(dataDir); err != nil {
		return "", "", err
	}
	if env && len(token) < minAdminTokenLen {
		// Not refused: a lab's short token keeps working after an
		// upgrade. But it is every right on the broker, guessed at
		// the failed-authentication limit's pace.
		log.Warn(fmt.Sprintf("VDIBROKER_ADMIN_TOKEN is %d characters long: the admin token holds every right on the broker; use one of at least %d random characters (serve makes one in the data dir when it is unset)",
			len(token), minAdminTokenLen))
	}
	hash = vdibroker.HashSecret(token)
	if env || !shared {
		return token, hash, st.SetSharedValue(ctx, name, hash, time.Now())
	}
	stored, err := st.InitSharedValue(ctx, name, hash, time.Now())
	switch {
	case err != nil:
		return "", "", err
	case stored == hash:
		return token, hash, nil
	case statErr != nil: // made just now, by a replica that was not the first
		os.Remove(path)
	default:
		log.Warn("admin.token is not the admin token the replicas share through the database, and is not accepted: "+
			"use the admin.token of the replica that started first, or set VDIBROKER_ADMIN_TOKEN on every replica", "file", path)
	}
	return "", stored, nil
}
