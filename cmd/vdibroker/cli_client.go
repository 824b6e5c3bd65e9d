package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// defaultServer is the broker the admin commands talk to when neither
// --server nor VDIBROKER_SERVER says otherwise (serve's default --listen).
const defaultServer = "http://127.0.0.1:8080"

// newAdminCommands returns the admin command tree (SPEC §11). It is a
// function, not a set of globals, so tests build a fresh tree per run and
// no flag value leaks from one invocation into the next.
func newAdminCommands() []*cobra.Command {
	return []*cobra.Command{
		newHostPoolCmd(),
		newSessionHostCmd(),
		newUserSessionCmd(),
		newConnectCmd(),
		newPlacementCmd(),
		newRegistrationTokenCmd(),
		newTokenCmd(),
		newScalingPlanCmd(),
		newApplicationGroupCmd(), // cli_entitlements.go
		newApplicationCmd(),
		newUserCmd(),
	}
}

func init() { rootCmd.AddCommand(newAdminCommands()...) }

// admin holds the flags every admin command shares: where the broker is, the
// token, and how to print the answer.
type admin struct {
	server string
	token  string
	out    output
	tls    clientTLSOptions
	// who is the broker's whoami answer for whoKey's server and token,
	// asked once for the command (whoAmI).
	who    *vhttp.WhoAmI
	whoKey string
}

// addAdminFlags registers --server, --token, --output and --query on a
// top-level admin command, for it and all its subcommands.
func addAdminFlags(cmd *cobra.Command) *admin {
	a := &admin{}
	pf := cmd.PersistentFlags()
	pf.StringVar(&a.server, "server", "", "broker URL (default $VDIBROKER_SERVER, else "+defaultServer+")")
	pf.StringVar(&a.token, "token", "", "API token (default $VDIBROKER_TOKEN)")
	pf.StringVar(&a.tls.CAFile, "ca-file", "", "PEM CA bundle to verify the broker's HTTPS certificate (default: the system's roots)")
	pf.BoolVar(&a.tls.InsecureHTTP, "insecure-http", false, "allow plain http:// to a broker that is not on loopback (the token crosses the network in clear)")
	pf.StringVarP(&a.out.Format, "output", "o", "", "output format: table, json, yaml or tsv")
	pf.StringVar(&a.out.Query, "query", "", "JMESPath query applied to the result before formatting, e.g. \"[].name\"")
	_ = cmd.RegisterFlagCompletionFunc("output", fixedCompletion(formatTable, formatJSON, formatYAML, formatTSV))
	return a
}

// client returns the API client for the flags and environment, or a usage
// error when --output or --query are wrong, so nothing is sent.
func (a *admin) client() (*vhttp.Client, error) {
	if err := a.outputFor(formatTable).validate(); err != nil {
		return nil, err
	}
	server, from := defaultServer, ""
	switch {
	case a.server != "":
		server, from = a.server, "--server"
	case os.Getenv("VDIBROKER_SERVER") != "":
		server, from = os.Getenv("VDIBROKER_SERVER"), "VDIBROKER_SERVER"
	}
	base, err := serverURL(server, from)
	if err != nil {
		return nil, usageError{err}
	}
	token := firstNonEmpty(a.token, os.Getenv("VDIBROKER_TOKEN"))
	if token == "" {
		return nil, usageError{errors.New(noTokenHint)}
	}
	hc, err := a.tls.httpClient(base, time.Minute)
	if err != nil {
		return nil, err
	}
	c := vhttp.NewClient(base, token)
	c.HTTPClient = hc
	return c, nil
}

// noTokenHint is the error of an admin command run without a token.
const noTokenHint = "no API token: set --token or VDIBROKER_TOKEN (serve writes the admin token to <data-dir>/admin.token on first start)"

// serverURL checks the broker's URL as given by from (--server or
// VDIBROKER_SERVER) and returns it without a trailing slash. A URL
// without a scheme, or one that names the API's /api/v1 instead of the
// broker, is refused with the URL to use instead.
func serverURL(server, from string) (string, error) {
	if from == "" {
		from = "the default server"
	}
	if !strings.Contains(server, "://") {
		return "", fmt.Errorf("%s %q has no scheme: use http://%s (or https://%s)", from, server, server, server)
	}
	u, err := url.Parse(server)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return "", fmt.Errorf("%s %q is not a broker URL: use http://HOST:PORT or https://HOST", from, server)
	}
	if p := strings.TrimRight(u.Path, "/"); strings.HasSuffix(p, "/api/v1") || strings.HasSuffix(p, "/api") {
		u.Path = strings.TrimSuffix(strings.TrimSuffix(p, "/v1"), "/api")
		return "", fmt.Errorf("%s %q names the API, not the broker: use %s (the CLI adds /api/v1 itself)", from, server, u.String())
	}
	return strings.TrimRight(server, "/"), nil
}

// outputFor returns the output settings with def as the format when
// --output was not given.
func (a *admin) outputFor(def string) output {
	o := a.out
	if o.Format == "" {
		o.Format = def
	}
	return o
}

// show prints the answer of a show or list command: a table unless --output
// says otherwise.
func (a *admin) show(cmd *cobra.Command, v any, columns []column) error {
	return a.outputFor(formatTable).print(cmd.OutOrStdout(), v, columns)
}

// result prints the answer of a command that changes something only when
// asked with --output or --query (json by default then), so that
// `hostpool update` is silent like the example in SPEC §11.
func (a *admin) result(cmd *cobra.Command, v any, columns []column) error {
	if a.out.Format == "" && a.out.Query == "" {
		return nil
	}
	return a.outputFor(formatJSON).print(cmd.OutOrStdout(), v, columns)
}

// deletion is what a delete command prints with -o json or -o yaml: the
// kind deleted, as the CLI names it (sessionhost, token, ...), and the
// names that found it (SPEC §11, docs/cli.md). hostpool delete prints the
// API's answer instead: what went with the pool.
type deletion struct {
	Deleted          string `json:"deleted"`
	HostPool         string `json:"hostPool,omitempty"`
	ApplicationGroup string `json:"applicationGroup,omitempty"`
	Name             string `json:"name,omitempty"`
	ID               string `json:"id,omitempty"`
}

// deleted prints d after a delete as result prints a change's answer:
// nothing unless --output or --query is given, so a script asking for
// JSON gets a document.
func (a *admin) deleted(cmd *cobra.Command, d deletion) error {
	return a.result(cmd, d, nil)
}

// apiError shows the server's message (SPEC §9 error body) as the error
// text, without the code or a JSON blob; run prints it as "error: <message>"
// and exits 1.
type apiError struct{ err *vdibroker.Error }

func (e apiError) Error() string {
	msg := e.err.Message
	if msg == "" {
		msg = e.err.Code
	}
	if e.err.Field != "" && !strings.Contains(msg, e.err.Field) {
		msg = e.err.Field + ": " + msg
	}
	// A host pool setting is named by its flag, as the user typed it.
	if flag, ok := flagOfField(e.err.Field); ok {
		msg = strings.Replace(msg, e.err.Field+": ", flag+": ", 1)
	}
	// One line, even when a proxy answered with a page of its own.
	return strings.Join(strings.Fields(msg), " ")
}

func (e apiError) Unwrap() error { return e.err }

// fail turns an error from the client into the error the user sees.
func fail(err error) error {
	if err == nil {
		return nil
	}
	var e *vdibroker.Error
	if errors.As(err, &e) {
		if e.Code == vdibroker.EUnauthenticated {
			return fmt.Errorf("the broker refused the token (%s): check --token or VDIBROKER_TOKEN", strings.TrimSuffix(e.Message, "."))
		}
		return apiError{e}
	}
	var rr redirectRefused
	if errors.As(err, &rr) {
		return rr
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		u, _ := url.Parse(ue.URL)
		if u != nil {
			u.Path, u.RawQuery = "", ""
			return fmt.Errorf("cannot reach the broker at %s (set --server or VDIBROKER_SERVER): %v", u, ue.Err)
		}
	}
	return err
}

// printWarnings writes the server's warnings (R-P3, R-E12) to stderr.
func printWarnings(cmd *cobra.Command, warnings []string) {
	for _, w := range warnings {
		fmt.Fprintln(cmd.ErrOrStderr(), "warning:", escapeTerminal(w, ""))
	}
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// requireFlags marks flags as required; cobra then refuses the command with
// a usage error (exit 2) when one is missing.
func requireFlags(cmd *cobra.Command, names ...string) {
	for _, n := range names {
		if err := cmd.MarkFlagRequired(n); err != nil {
			panic(err) // a flag name typo in this file
		}
	}
}

func fixedCompletion(values ...string) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return values, cobra.ShellCompDirectiveNoFileComp
	}
}

// boolValue is a boolean flag that takes its value as the next word, as in
// `--allow-new-session false` (SPEC §11, az style), unlike pflag's bools
// which only take `--flag=false`.
type boolValue struct{ v *bool }

func (b boolValue) String() string {
	if b.v == nil {
		return "false"
	}
	return strconv.FormatBool(*b.v)
}

func (b boolValue) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("must be true or false")
	}
	*b.v = v
	return nil
}

func (b boolValue) Type() string { return "true|false" }

// completePools completes a host pool name from the broker (--host-pool,
// hostpool --name), using --server, --token and the environment.
func (a *admin) completePools(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
	c, err := a.client()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	pools, err := c.ListHostPools(ctx)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	names := make([]string, len(pools))
	for i, p := range pools {
		names[i] = p.Name
	}
	return names, cobra.ShellCompDirectiveNoFileComp
}

// completeHosts completes a session host name of the --host-pool given.
func (a *admin) completeHosts(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
	pool := ""
	if f := cmd.Flags().Lookup("host-pool"); f != nil {
		pool = f.Value.String()
	}
	c, err := a.client()
	if pool == "" || err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	hosts, err := c.ListSessionHosts(ctx, pool)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	names := make([]string, len(hosts))
	for i, h := range hosts {
		names[i] = h.Name
	}
	return names, cobra.ShellCompDirectiveNoFileComp
}

// completeNames registers broker-backed completion of --host-pool and, for
// commands that name a pool or host with --name, of --name: on every
// subcommand of cmd that has those flags. what is "pool" or "host".
func (a *admin) completeNames(cmd *cobra.Command, what string) {
	for _, sub := range cmd.Commands() {
		if sub.Flags().Lookup("host-pool") != nil {
			_ = sub.RegisterFlagCompletionFunc("host-pool", a.completePools)
		}
		if sub.Flags().Lookup("name") == nil || sub.Name() == "create" {
			continue
		}
		switch what {
		case "pool":
			_ = sub.RegisterFlagCompletionFunc("name", a.completePools)
		case "host":
			_ = sub.RegisterFlagCompletionFunc("name", a.completeHosts)
		}
	}
}
