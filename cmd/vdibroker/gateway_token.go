package main

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/gatewaytoken"
)

// newGatewayKeygenCmd makes a token signing key and its JWKS: until the
// broker signs tokens itself, an operator (or a test) mints them with
// `gateway token`.
func newGatewayKeygenCmd() *cobra.Command {
	var keyID, keyFile, jwksFile string
	cmd := &cobra.Command{
		Use:   "keygen --key-id ID --private-key FILE --jwks FILE",
		Short: "Make an Ed25519 token signing key (a new PEM file, " + secretFileAccess + ") and the JWKS file a gateway verifies with",
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
			jwks, err := gatewaytoken.MarshalJWKS(map[string]ed25519.PublicKey{keyID: s.PublicKey()})
			if err != nil {
				return err
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
			if _, err := f.Write(pem); err != nil {
				f.Close()
				return err
			}
			if err := f.Close(); err != nil {
				return err
			}
			return os.WriteFile(jwksFile, append(jwks, '\n'), 0o644)
		},
	}
	cmd.Flags().StringVar(&keyID, "key-id", "", "the key's id (1..64 of A-Z a-z 0-9 _ -)")
	cmd.Flags().StringVar(&keyFile, "private-key", "", "file to write the private key to")
	cmd.Flags().StringVar(&jwksFile, "jwks", "", "file to write the public key set to")
	for _, f := range []string{"key-id", "private-key", "jwks"} {
		cmd.MarkFlagRequired(f)
	}
	return cmd
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
