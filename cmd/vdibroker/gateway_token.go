package main

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/gatewaytoken"
)

// newGatewayKeygenCmd makes a token signing key and adds its public key
// to a JWKS file: until the broker signs tokens itself, an operator (or
// a test) mints them with `gateway token`. The file's other keys stay,
// so a gateway reading it goes on accepting the tokens of the key in
// use while the new one is published (docs/gateway.md's rotation, R-GW6).
func newGatewayKeygenCmd() *cobra.Command {
	var keyID, keyFile, jwksFile string
	cmd := &cobra.Command{
		Use:   "keygen --key-id ID --private-key FILE --jwks FILE",
		Short: "Make an Ed25519 token signing key (a new PEM file, " + secretFileAccess + ") and add its public key to the JWKS file a gateway verifies with",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := gatewaytoken.GenerateSigner(keyID)
			if err != nil {
				return usageError{fmt.Errorf("--key-id: %w", err)}
			}
			pem, err := gatewaytoken.MarshalPrivateKeyPEM(s.Key)
			if err != nil {
				return err
			}
			// Every refusal before the first write: a refused keygen
			// leaves no key file and the JWKS file as it was.
			keys, was, err := readKeygenJWKS(jwksFile)
			if err != nil {
				return usageError{err}
			}
			if _, dup := keys[keyID]; dup {
				return usageError{fmt.Errorf("--jwks %s already has key id %q: give another --key-id (keygen never replaces a key)", jwksFile, keyID)}
			}
			keys[keyID] = s.PublicKey()
			jwks, err := gatewaytoken.MarshalJWKS(keys)
			if err != nil {
				return usageError{fmt.Errorf("--jwks %s: %w; remove a key no token is signed with any more first", jwksFile, err)}
			}
			// The key's file is its owner's alone from its first byte
			// (createSecretFile: mode 0600; on Windows a DACL of its
			// own, not its folder's), and never an existing file, whose
			// mode or DACL os.WriteFile would keep (R-SEC).
			f, err := createSecretFile(keyFile)
			if errors.Is(err, os.ErrExist) {
				return fmt.Errorf("--private-key %s exists: give a new file (keygen never replaces a key)", keyFile)
			}
			if err != nil {
				return err
			}
			// The same file by two names (the same path, or one spelled
			// otherwise): the JWKS file's rename would replace the key
			// just written, and keygen succeed with the key lost.
			if same(keyFile, jwksFile) {
				f.Close()
				os.Remove(keyFile)
				return usageError{fmt.Errorf("--private-key %s and --jwks %s are the same file: give two files", keyFile, jwksFile)}
			}
			_, err = f.Write(pem)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err == nil {
				mode := os.FileMode(0o644) // a public key set
				if was != nil {
					mode = was.Mode().Perm()
				}
				err = writeFileAtomicLike(jwksTarget(jwksFile), append(jwks, '\n'), mode, was)
			}
			if err != nil {
				// The file is keygen's own (created above, never an
				// existing one): a part of a key, or a key whose public
				// half no JWKS holds, is no use, and would refuse the
				// same command run again.
				os.Remove(keyFile)
				return err
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&keyID, "key-id", "", "the key's id (1..64 of A-Z a-z 0-9 _ -), not one the --jwks file has")
	cmd.Flags().StringVar(&keyFile, "private-key", "", "file to write the private key to (a new file)")
	cmd.Flags().StringVar(&jwksFile, "jwks", "", "JWKS file to add the public key to (made when absent; its other keys stay)")
	for _, f := range []string{"key-id", "private-key", "jwks"} {
		cmd.MarkFlagRequired(f)
	}
	return cmd
}

// readKeygenJWKS reads the keys of the JWKS file path and its mode,
// owner and group (its FileInfo); a file that does not exist is no keys,
// no FileInfo.
func readKeygenJWKS(path string) (map[string]ed25519.PublicKey, os.FileInfo, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return map[string]ed25519.PublicKey{}, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("--jwks: %w", err)
	}
	ks, err := gatewaytoken.ParseJWKS(data)
	if err != nil {
		return nil, nil, fmt.Errorf("--jwks %s is not a JWKS file of Ed25519 keys (%w): give a new file or a gateway's key file, which keygen adds the key to", path, err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, nil, fmt.Errorf("--jwks: %w", err)
	}
	return ks.Keys(), fi, nil
}

// same reports whether the paths a and b name one file. By path, not by
// the open file: on Windows createSecretFile's handle may write, not
// read attributes.
func same(a, b string) bool {
	ai, err := os.Stat(a)
	if err != nil {
		return false
	}
	bi, err := os.Stat(b)
	return err == nil && os.SameFile(ai, bi)
}

// jwksTarget is the file keygen replaces for the JWKS file path: the
// file a symbolic link path names (as a gateway reading path reads it),
// not the link, which a rename over path would replace with a file of
// its own; path itself when it is no link or names nothing yet.
func jwksTarget(path string) string {
	if fi, err := os.Lstat(path); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		return path
	}
	if target, err := filepath.EvalSymlinks(path); err == nil {
		return target
	}
	return path
}

// writeFileAtomic replaces the file path with data, mode perm: written
// to a new file beside it, then renamed over it, so a reader (a gateway
// reloading its keys) reads the old file or the new one, never a part.
func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	return writeFileAtomicLike(path, data, perm, nil)
}

// writeFileAtomicLike is writeFileAtomic giving the file the owner and
// group of like, the file it replaces (none when nil): replaced by
// another account (root), it stays readable by those who read it.
func writeFileAtomicLike(path string, data []byte, perm os.FileMode, like os.FileInfo) error {
	// A file only its owner may read (an .rdp file holds a gateway
	// token) is its owner's from its first byte; on Windows with a DACL
	// of its own (createSecretFile's), not its folder's.
	create := os.CreateTemp
	if perm&0o077 == 0 {
		create = createSecretTemp
	}
	f, err := create(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && like != nil {
		err = chownLike(tmp, like)
	}
	if err == nil {
		err = os.Chmod(tmp, perm)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// newGatewayTokenCmd signs one access token and prints it.
func newGatewayTokenCmd() *cobra.Command {
	var keyID, keyFile string
	var c gatewaytoken.Claims
	var valid, idle, life, wait time.Duration
	cmd := &cobra.Command{
		Use:   "token --key-id ID --private-key FILE --user U --host HOST:PORT [--session S --pool P --valid 5m]",
		Short: "Sign a gateway access token (gatewayaccesstoken) for one tunnel to one host",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			pem, err := os.ReadFile(keyFile)
			if err != nil {
				return usageError{fmt.Errorf("--private-key: %w", err)}
			}
			key, err := gatewaytoken.ParsePrivateKeyPEM(pem)
			if err != nil {
				return usageError{fmt.Errorf("--private-key %s: %w", keyFile, err)}
			}
			s, err := gatewaytoken.NewSigner(keyID, key)
			if err != nil {
				return usageError{fmt.Errorf("--key-id: %w", err)}
			}
			// In the flag's terms, before the claims' (nbf, exp in Unix
			// seconds) would say it.
			if valid < time.Second || valid > gatewaytoken.MaxValidity {
				return usageError{fmt.Errorf("--valid: must be 1s..%s, got %s", vdibroker.DurationFlag(gatewaytoken.MaxValidity), vdibroker.DurationFlag(valid))}
			}
			now := time.Now()
			c.ID, c.NotBefore, c.Expiry = gatewaytoken.NewID(), now.Unix(), now.Add(valid).Unix()
			c.IdleSeconds, c.LifetimeSeconds, c.StartWaitSeconds = int64(idle/time.Second), int64(life/time.Second), int64(wait/time.Second)
			tok, err := s.Sign(c)
			if err != nil {
				return usageError{err}
			}
			fmt.Fprintln(cmd.OutOrStdout(), tok)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&keyID, "key-id", "", "id of the signing key")
	fl.StringVar(&keyFile, "private-key", "", "PEM file of the signing key (from gateway keygen)")
	fl.StringVar(&c.User, "user", "", "user the tunnel is for")
	fl.StringVar(&c.Host, "host", "", "the host's RDP address, host:port: the only target allowed")
	fl.StringVar(&c.Session, "session", "manual", "session id")
	fl.StringVar(&c.Pool, "pool", "manual", "host pool")
	fl.DurationVar(&valid, "valid", 5*time.Minute, "how long the token may be used to open a tunnel (at most 1h)")
	fl.DurationVar(&idle, "idle-timeout", 0, "the tunnel's idle timeout (0: the gateway's)")
	fl.DurationVar(&life, "lifetime", 0, "the tunnel's maximum lifetime (0: the gateway's)")
	fl.DurationVar(&wait, "start-wait", 0, "hold the client up to this long while the host starts")
	for _, f := range []string{"key-id", "private-key", "user", "host"} {
		cmd.MarkFlagRequired(f)
	}
	return cmd
}
