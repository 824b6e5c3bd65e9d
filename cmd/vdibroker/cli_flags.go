package main

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/vdibroker/vdibroker"
)

// The CLI fails loudly and in its own words: a mistake in how a command is
// called exits 2 with one line that names the flag or the command, what
// is allowed (in the flag's own units), and a "did you mean" when a near
// name exists. Values are checked as flags are parsed, so nothing is sent
// to the broker when one is wrong.

// configureRoot gives a root command the CLI's handling of mistakes: flag
// errors in the CLI's words, and unknown commands refused with exit 2.
func configureRoot(root *cobra.Command) {
	root.SetFlagErrorFunc(flagError)
	root.Args = cobra.ArbitraryArgs
	root.RunE = groupRunE
}

// groupCommands makes every command with subcommands and no action of its
// own refuse an unknown subcommand (cobra would print the help and exit 0,
// which scripts take for success), recursively.
func groupCommands(cmd *cobra.Command) {
	for _, sub := range cmd.Commands() {
		groupCommands(sub)
	}
	if cmd.HasSubCommands() && cmd.Run == nil && cmd.RunE == nil {
		cmd.Args = cobra.ArbitraryArgs
		cmd.RunE = groupRunE
	}
	if cmd.Args != nil && reflect.ValueOf(cmd.Args).Pointer() == reflect.ValueOf(cobra.NoArgs).Pointer() {
		cmd.Args = noArgs
	}
	requiredNotEmpty(cmd)
}

// noArgs is cobra.NoArgs, whose "unknown command" names the word, with
// unknownWord's rule for one that looks like a secret.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageError{unknownWord(cmd, args[0])}
	}
	return nil
}

// requiredNotEmpty makes a required string flag given as "" (--user "",
// an unset shell variable) a usage error naming the flag. cobra takes ""
// as given; sent on, it became an empty path segment the broker
// redirects, which read "cannot reach the broker at ", or a refusal in
// the API's field names. Flags of their own type (names, enums) check
// "" as they parse.
func requiredNotEmpty(cmd *cobra.Command) {
	var names []string
	cmd.LocalNonPersistentFlags().VisitAll(func(f *pflag.Flag) {
		if f.Value.Type() == "string" && slices.Contains(f.Annotations[cobra.BashCompOneRequiredFlag], "true") {
			names = append(names, f.Name)
		}
	})
	if len(names) == 0 {
		return
	}
	prev := cmd.PreRunE
	cmd.PreRunE = func(c *cobra.Command, args []string) error {
		if err := emptyFlag(c, names...); err != nil {
			return err
		}
		if prev != nil {
			return prev(c, args)
		}
		return nil
	}
}

// emptyFlag is the usage error naming the first of names that was given
// as "" (--user "$U" of an unset variable), nil if none was. An optional
// filter given as "" filtered nothing: usersession list --user "" listed
// every user's sessions, audit list --action "" every entry, as if the
// flag were absent; a command that means "no filter" leaves the flag out.
func emptyFlag(cmd *cobra.Command, names ...string) error {
	for _, n := range names {
		if f := cmd.Flags().Lookup(n); f != nil && f.Changed && f.Value.String() == "" {
			return usageError{fmt.Errorf("--%s \"\": must not be empty", n)}
		}
	}
	return nil
}

// unknownRootCommand is the error of args whose first word is no command
// of root ("vdibroker hostpol list"), found before root parses flags that
// belong to the subcommand the user meant; nil otherwise. The word may
// follow the admin commands' flags, as the demo's banner writes them
// ("vdibroker --server URL --token T hostpol list"): root does not know
// those flags, so its parse would blame --server, not the command.
func unknownRootCommand(root *cobra.Command, args []string) error {
	i := firstWord(root, args)
	if i < 0 {
		return nil
	}
	switch args[i] {
	case "help", "completion", cobra.ShellCompRequestCmd, cobra.ShellCompNoDescRequestCmd:
		return nil // cobra adds these as it executes
	}
	if c, _, err := root.Find(args[i:]); err == nil && c != root {
		return nil
	}
	if hasFlag(args[:i], "server") && !hasFlag(args[:i], "token") && looksLikeSecret(root, args[i]) {
		// "vdibroker --server URL SECRET hostpool list": --token was
		// left out before the token, which must not be echoed.
		return usageError{fmt.Errorf("unknown command (not shown); did you forget --token? see %s --help", root.CommandPath())}
	}
	return usageError{unknownCommand(root, args[i])}
}

// hasFlag reports whether flags (the arguments before the command) give
// the long flag name, as --name or --name=value.
func hasFlag(flags []string, name string) bool {
	return slices.ContainsFunc(flags, func(a string) bool {
		return a == "--"+name || strings.HasPrefix(a, "--"+name+"=")
	})
}

// minSecretLen is the length from which an unknown command that is no
// command's near miss is taken for a secret: the broker's own are 32
// characters or more, but a token an administrator wrote may be shorter,
// and hiding a long mistyped word costs only its echo.
const minSecretLen = 10

// plainWord is a word of lowercase letters, hyphens between them, as
// commands and host pools are named ("deployment", "office-breadth"):
// written where a command goes it is a mistake to be shown, not one of
// the broker's secrets (a prefix and hex) or a token one would choose.
var plainWord = regexp.MustCompile(`^[a-z]+(-[a-z]+)*$`)

// looksLikeSecret reports whether word, an unknown command of root (the
// top, a group, or a command taking no arguments), looks like a bearer
// token rather than a mistyped command: one of the broker's secrets
// (vdb_admin_, vdbt_, vdbr_, vdbh_), or minSecretLen characters or more
// without a space, not a plainWord, near no command of root (no "did you
// mean") and not starting with one's name ("hostpoollist").
func looksLikeSecret(root *cobra.Command, word string) bool {
	for _, p := range []string{"vdb_admin_", "vdbt_", "vdbr_", "vdbh_"} {
		if strings.HasPrefix(word, p) {
			return true
		}
	}
	if utf8.RuneCountInString(word) < minSecretLen || strings.ContainsFunc(word, unicode.IsSpace) || plainWord.MatchString(word) {
		return false
	}
	if root.SuggestionsMinimumDistance <= 0 {
		root.SuggestionsMinimumDistance = 2 // as unknownCommand
	}
	if len(root.SuggestionsFor(word)) > 0 {
		return false
	}
	lower := strings.ToLower(word)
	for _, c := range root.Commands() {
		if strings.HasPrefix(lower, c.Name()) {
			return false
		}
	}
	return true
}

// firstWord is the index in args of the first word that is neither a flag
// nor a flag's value, -1 if there is none (or "--" comes first).
func firstWord(root *cobra.Command, args []string) int {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return -1
		case !strings.HasPrefix(a, "-") || a == "-":
			return i
		case takesNext(root, a):
			i++ // its value
		}
	}
	return -1
}

// takesNext reports whether a, a flag written before the command, takes
// the next argument as its value, as pflag reads it: a flag root's
// commands define does unless it is a boolean or written --flag=value;
// one none defines is taken to, as cobra's own search for the command
// does. Shorthands written together ("-ojson", "-vo json") are read one
// letter at a time: a boolean lets the next letter be another shorthand,
// one with a value takes the rest of a, or the next argument when it is
// the last letter; "-ojson" took "hostpool" for its value, and "list"
// was searched for as the command.
func takesNext(root *cobra.Command, a string) bool {
	switch {
	case strings.Contains(a, "="), isHelpFlag(a):
		return false
	case strings.HasPrefix(a, "--"):
		return !flagIsBool(root, a[2:], false)
	}
	letters := []rune(a[1:])
	for j, r := range letters {
		if !flagIsBool(root, string(r), true) {
			return j == len(letters)-1
		}
	}
	return false
}

// isHelpFlag reports whether a is the help flag, which cobra gives each
// command only as it runs it: no command has it yet when args are
// searched, so flagIsBool would take it for a flag with a value.
func isHelpFlag(a string) bool { return a == "--help" || a == "-h" }

// rootHelpAsked reports whether args ask for help with no command named:
// a --help or -h among flags alone ("vdibroker --server URL --help", the
// admin flags written first as the demo's banner writes them). cobra
// looks for the command before it knows the help flag, so it blamed
// --server, which no command follows, and exited 2.
func rootHelpAsked(root *cobra.Command, args []string) bool {
	if firstWord(root, args) >= 0 {
		return false // the command's help, once commandFirst moved the flags after it
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return false
		case isHelpFlag(a):
			return true
		case takesNext(root, a):
			i++ // its value, as firstWord skips it
		}
	}
	return false
}

// commandFirst moves the flags written before the command ("vdibroker
// --server URL --insecure-http hostpool list") right after the command's
// first word ("hostpool --server URL --insecure-http list"), where cobra
// knows them as it searches for the rest of the command and parses them
// as that command's flags. cobra searches for the command before it knows
// any command's flags: it took the word after a boolean flag
// (--insecure-http, --help) for that flag's value, so the command named
// was not found ("unknown command "hostpool" (did you mean
// "hostpool"?)"). Nothing after the first word moves: a "--" there may be
// a flag's value ("--description --"), not the end of the flags, and the
// flags stay before a "--" that is one. firstWord knows them; root has no
// flag of its own to lose. The help flag, which no command has until
// cobra runs one, is written --help=true, which cobra's search does not
// take to have a value ("-h hostpool list" asks for list's help).
func commandFirst(root *cobra.Command, args []string) []string {
	i := firstWord(root, args)
	if i <= 0 {
		return args
	}
	out := make([]string, 0, len(args))
	out = append(out, args[i])
	for _, a := range args[:i] {
		if isHelpFlag(a) {
			a = "--help=true"
		}
		out = append(out, a)
	}
	return append(out, args[i+1:]...)
}

// flagIsBool reports whether name (a shorthand when short) is a flag of
// root or of one of its commands that takes no value.
func flagIsBool(root *cobra.Command, name string, short bool) bool {
	cmds := append([]*cobra.Command{root}, root.Commands()...)
	for _, c := range cmds {
		var f *pflag.Flag
		if short {
			if len(name) != 1 {
				return false // -abc: shorthands together, as cobra takes them
			}
			f = c.Flags().ShorthandLookup(name)
			if f == nil {
				f = c.PersistentFlags().ShorthandLookup(name)
			}
		} else if f = c.Flags().Lookup(name); f == nil {
			f = c.PersistentFlags().Lookup(name)
		}
		if f != nil {
			return f.NoOptDefVal != ""
		}
	}
	return false
}

// groupRunE runs a command that only groups others: no argument shows its
// help; anything else is an unknown command.
func groupRunE(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return cmd.Help()
	}
	return usageError{unknownWord(cmd, args[0])}
}

// unknownWord is the error of word, no command of cmd (a group, or a
// command that takes no arguments): unknownCommand, or, when the command
// line gives --server and not --token and word looks like a secret
// (looksLikeSecret against cmd's own commands), the same error without
// the word, asking whether --token (the agent's --registration-token,
// secretFlag) was forgotten, as unknownRootCommand
// answers a word where the first command goes: "vdibroker --server URL
// hostpool SECRET" is a token written without its flag, not to be echoed
// to a terminal, a log or a CI transcript (R-SEC).
func unknownWord(cmd *cobra.Command, word string) error {
	f := cmd.Flags()
	if flag := secretFlag(cmd); f.Changed("server") && !f.Changed(flag) && looksLikeSecret(cmd, word) {
		return fmt.Errorf("unknown command (not shown) for %q; did you forget --%s? see %s --help", cmd.CommandPath(), flag, cmd.CommandPath())
	}
	if !cmd.HasSubCommands() {
		return fmt.Errorf("unknown command %q for %q", word, cmd.CommandPath()) // cobra.NoArgs's words
	}
	return unknownCommand(cmd, word)
}

// secretFlag is the flag cmd takes its secret with: --token for the
// API's commands, --registration-token for the agent's, whose --server
// is the broker an agent registers with (R-SEC: "vdibroker agent
// --server URL vdbr_..." is a registration token without its flag).
func secretFlag(cmd *cobra.Command) string {
	if cmd.Flags().Lookup("token") == nil && cmd.Flags().Lookup("registration-token") != nil {
		return "registration-token"
	}
	return "token"
}

// unknownCommand says that name is not a subcommand of cmd, with the
// nearest names or, lacking any, the list of its commands.
func unknownCommand(cmd *cobra.Command, name string) error {
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2 // cobra's own default, which SuggestionsFor does not apply
	}
	hint := ""
	if s := cmd.SuggestionsFor(name); len(s) > 0 {
		hint = fmt.Sprintf(" (did you mean %s?)", quoteList(s))
	} else {
		var names []string
		for _, c := range cmd.Commands() {
			if c.IsAvailableCommand() {
				names = append(names, c.Name())
			}
		}
		hint = " (commands: " + strings.Join(names, ", ") + ")"
	}
	return fmt.Errorf("unknown command %q for %q%s; see %s --help", name, cmd.CommandPath(), hint, cmd.CommandPath())
}

// commandsWithFlag names cmd's commands that have the flag name: the
// first three, then "…".
func commandsWithFlag(cmd *cobra.Command, name string) []string {
	var out []string
	for _, c := range cmd.Commands() {
		if c.PersistentFlags().Lookup(name) == nil && c.Flags().Lookup(name) == nil {
			continue
		}
		if len(out) == 3 {
			return append(out, "…")
		}
		out = append(out, c.Name())
	}
	return out
}

func quoteList(s []string) string {
	q := make([]string, len(s))
	for i, v := range s {
		q[i] = strconv.Quote(v)
	}
	return orList(q)
}

var (
	unknownFlagRe = regexp.MustCompile(`^unknown flag: --(\S+)$`)
	invalidArgRe  = regexp.MustCompile(`^invalid argument "(.*)" for "(.*)" flag: (.*)$`)
)

// flagError rewrites pflag's errors in the CLI's words: an unknown flag
// with the nearest known one, a bad value with the flag, the value and
// what is allowed (never a Go parser's message).
func flagError(cmd *cobra.Command, err error) error {
	msg := err.Error()
	if m := unknownFlagRe.FindStringSubmatch(msg); m != nil {
		if subs := commandsWithFlag(cmd, m[1]); !cmd.HasParent() && len(subs) > 0 {
			// "vdibroker --server URL" and no command after it: the
			// flag is right, the command is missing.
			return usageError{fmt.Errorf("--%s is a flag of commands (%s), and no command follows it; see %s --help", m[1], strings.Join(subs, ", "), cmd.CommandPath())}
		}
		near := nearestFlags(cmd, m[1])
		if len(near) > 0 {
			return usageError{fmt.Errorf("unknown flag --%s for %q (did you mean %s?)", m[1], cmd.CommandPath(), quoteList(near))}
		}
		return usageError{fmt.Errorf("unknown flag --%s for %q; see %s --help", m[1], cmd.CommandPath(), cmd.CommandPath())}
	}
	if m := invalidArgRe.FindStringSubmatch(msg); m != nil {
		value, flag, why := m[1], m[2], m[3]
		if _, long, ok := strings.Cut(flag, ", "); ok {
			flag = long // pflag names a flag with a shorthand "-n, --name"
		}
		if utf8.RuneCountInString(value) > maxQuotedValue {
			// A page of text quoted back hides the reason.
			return usageError{fmt.Errorf("%s: %s", flag, plainReason(why))}
		}
		return usageError{fmt.Errorf("%s %q: %s", flag, value, plainReason(why))}
	}
	return usageError{err}
}

// maxQuotedValue is the longest flag value a flag error quotes.
const maxQuotedValue = 80

// plainReason replaces the parsers' messages of pflag's own flag types.
func plainReason(why string) string {
	switch {
	case strings.HasPrefix(why, "time: "):
		return "must be a duration such as 90s, 30m, 24h or 1h30m"
	case strings.HasPrefix(why, "strconv.ParseInt"), strings.HasPrefix(why, "strconv.Atoi"):
		return "must be a whole number"
	case strings.HasPrefix(why, "strconv.ParseFloat"):
		return "must be a number"
	case strings.HasPrefix(why, "strconv.ParseBool"):
		return "must be true or false"
	}
	return why
}

// nearestFlags returns the flags of cmd (its own and inherited) whose names
// are within an edit distance of 2 of name, or that it is a prefix of.
func nearestFlags(cmd *cobra.Command, name string) []string {
	type cand struct {
		name string
		d    int
	}
	var cands []cand
	seen := map[string]bool{}
	visit := func(f *pflag.Flag) {
		if f.Hidden || seen[f.Name] {
			return
		}
		seen[f.Name] = true
		d := levenshtein(name, f.Name)
		if d <= 2 || (len(name) >= 3 && strings.HasPrefix(f.Name, name)) {
			cands = append(cands, cand{f.Name, d})
		}
	}
	cmd.LocalFlags().VisitAll(visit)
	cmd.InheritedFlags().VisitAll(visit)
	sort.SliceStable(cands, func(i, j int) bool { return cands[i].d < cands[j].d })
	var out []string
	for _, c := range cands[:min(len(cands), 3)] {
		out = append(out, "--"+c.name)
	}
	return out
}

// nearNames returns at most limit of names that are near name, as the "did
// you mean" of an enum flag's value or a resource's name (cli_suggest.go)
// proposes them. Near is what commands and flags use (cobra's
// SuggestionsFor, nearestFlags): an edit distance of at most 2, or name
// (3 characters or more) a prefix of it; here in any case. Only the
// nearest are kept: the same name in another case alone, else those at
// the smallest distance (as git's "did you mean"), so "jsn" is "json"
// (1), not also "tsv" (2). name itself is never proposed.
func nearNames(name string, names []string, limit int) []string {
	lname := strings.ToLower(name)
	prefix := utf8.RuneCountInString(name) >= 3
	best, out := -1, []string(nil)
	for _, n := range names {
		if n == name || slices.Contains(out, n) {
			continue
		}
		ln := strings.ToLower(n)
		d := -1 // the same name in another case: nearer than any other
		if ln != lname {
			isPrefix := prefix && strings.HasPrefix(ln, lname)
			if !isPrefix && abs(utf8.RuneCountInString(ln)-utf8.RuneCountInString(lname)) > 2 {
				continue // more than 2 edits apart: spare the distance
			}
			d = levenshtein(lname, ln)
			if d > 2 && !isPrefix {
				continue
			}
		}
		switch {
		case out == nil || d < best:
			best, out = d, []string{n}
		case d == best:
			out = append(out, n)
		}
	}
	return out[:min(len(out), limit)]
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// levenshtein is the edit distance of a and b in characters (runes).
func levenshtein(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur := make([]int, len(rb)+1)
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(rb)]
}

// enumValue is a string flag that takes one of a fixed list of values.
type enumValue struct {
	v       *string
	allowed []string
}

func newEnum(v *string, def string, allowed ...string) *enumValue {
	*v = def
	return &enumValue{v: v, allowed: allowed}
}

func (e *enumValue) String() string { return *e.v }
func (e *enumValue) Type() string   { return strings.Join(e.allowed, "|") }
func (e *enumValue) Set(s string) error {
	if !slices.Contains(e.allowed, s) {
		return errors.New(enumReason(e.allowed, s))
	}
	*e.v = s
	return nil
}

// enumReason is the refusal of s, which is none of allowed: the list, and
// the nearest of them (nearNames), as in "must be one of table, json,
// yaml, tsv (did you mean json?)".
func enumReason(allowed []string, s string) string {
	why := "must be one of " + strings.Join(allowed, ", ")
	if near := nearNames(s, allowed, 3); len(near) > 0 {
		why += " (did you mean " + orList(near) + "?)"
	}
	return why
}

// orList is "a", "a or b", "a, b or c".
func orList(s []string) string {
	if len(s) <= 1 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

// nameValue is a host pool or session host name flag, checked as the API
// checks names (SPEC §2, §3), so a name the API would not route (a slash)
// or refuse is refused here in the flag's words.
type nameValue struct {
	v        *string
	min, max int
}

func poolNameVar(f *pflag.FlagSet, v *string, name, short, usage string) {
	f.VarP(&nameValue{v, vdibroker.MinPoolNameLen, vdibroker.MaxPoolNameLen}, name, short, usage)
}

func hostNameVar(f *pflag.FlagSet, v *string, name, short, usage string) {
	f.VarP(&nameValue{v, vdibroker.MinHostNameLen, vdibroker.MaxHostNameLen}, name, short, usage)
}

// appGroupNameVar is an application group name flag (R-E1).
func appGroupNameVar(f *pflag.FlagSet, v *string, name, usage string) {
	f.Var(&nameValue{v, vdibroker.MinAppGroupNameLen, vdibroker.MaxAppGroupNameLen}, name, usage)
}

// appNameVar is an application name flag (R-E7).
func appNameVar(f *pflag.FlagSet, v *string, name, usage string) {
	f.Var(&nameValue{v, vdibroker.MinAppNameLen, vdibroker.MaxAppNameLen}, name, usage)
}

// textValue is a free-text flag (--description, --friendly-name) held to
// the broker's limit as it is parsed, so a long text is a usage error
// naming the flag and the limit before anything is sent. Its type is
// "string", as a plain string flag's, for GetString and requiredNotEmpty.
type textValue struct {
	v   *string
	max int
}

// textVar is a free-text flag of at most max characters.
func textVar(f *pflag.FlagSet, v *string, name string, max int, usage string) {
	f.Var(&textValue{v, max}, name, usage)
}

func (t *textValue) String() string { return *t.v }
func (t *textValue) Type() string   { return "string" }
func (t *textValue) Set(s string) error {
	if n := utf8.RuneCountInString(s); n > t.max {
		return fmt.Errorf("must be at most %d characters, got %d", t.max, n)
	}
	*t.v = s
	return nil
}

func (n *nameValue) String() string { return *n.v }
func (n *nameValue) Type() string   { return "name" }
func (n *nameValue) Set(s string) error {
	if err := vdibroker.ValidateName("name", s, n.min, n.max); err != nil {
		return errors.New(strings.TrimPrefix(vdibroker.ErrorMessage(err), "name: "))
	}
	*n.v = s
	return nil
}

// addressValue is a session host's host:port flag, checked as the API
// checks the address (vdibroker.ValidateAddress), in the flag's words.
type addressValue struct{ v *string }

func (a addressValue) String() string { return *a.v }
func (a addressValue) Type() string   { return "host:port" }
func (a addressValue) Set(s string) error {
	if err := vdibroker.ValidateAddress("address", s); err != nil {
		return errors.New(strings.TrimPrefix(vdibroker.ErrorMessage(err), "address: "))
	}
	*a.v = s
	return nil
}

// intRangeValue is a whole-number flag checked against the range the API
// allows, so a value outside it is a mistake in the command said in the
// flag's words (exit 2), not the broker's refusal naming its JSON field.
type intRangeValue struct {
	v        *int
	min, max int
	note     string // after the range, e.g. " (0: no limit)"
}

func intRangeVar(f *pflag.FlagSet, v *int, name string, def, min, max int, note, usage string) {
	*v = def
	f.Var(&intRangeValue{v, min, max, note}, name, usage)
}

func (n *intRangeValue) String() string { return strconv.Itoa(*n.v) }
func (n *intRangeValue) Type() string   { return "int" }
func (n *intRangeValue) Set(s string) error {
	v, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return fmt.Errorf("must be a whole number, %d..%d%s", n.min, n.max, n.note)
	}
	if v < n.min || v > n.max {
		return fmt.Errorf("must be %d..%d%s, got %d", n.min, n.max, n.note, v)
	}
	*n.v = v
	return nil
}

// fieldValue is the flag of a numeric or enum host pool setting, checked
// against the schema (vdibroker.PoolFields) as it is parsed: the same
// range the API enforces (R-P4), said with the flag's name.
type fieldValue struct {
	f   vdibroker.Field
	set bool
	v   any // int, float64 or string
}

func (fv *fieldValue) String() string {
	if fv.v == nil {
		return ""
	}
	return vdibroker.FormatValue(fv.v)
}

func (fv *fieldValue) Type() string {
	switch fv.f.Kind {
	case vdibroker.KindInt:
		return "int"
	case vdibroker.KindNumber:
		return "number"
	case vdibroker.KindEnum:
		return "string"
	}
	return "string"
}

func (fv *fieldValue) Set(s string) error {
	f := fv.f
	switch f.Kind {
	case vdibroker.KindInt:
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("must be a whole number, %s", f.Range())
		}
		if err := f.CheckValue(f.Path, "", n); err != nil {
			return errors.New(fieldReason(f, err))
		}
		fv.v = n
	case vdibroker.KindNumber:
		x, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
			return fmt.Errorf("must be a number, %s", f.Range())
		}
		if err := f.CheckValue(f.Path, "", x); err != nil {
			return errors.New(fieldReason(f, err))
		}
		fv.v = x
	case vdibroker.KindEnum:
		// Every value of any pool type: the broker says which fit the
		// pool's type.
		allowed := f.Values("")
		if !slices.Contains(allowed, s) {
			return (&enumValue{v: new(string), allowed: allowed}).Set(s)
		}
		fv.v = s
	default:
		fv.v = s
	}
	fv.set = true
	return nil
}

// fieldReason is a schema check's message without the field's JSON path
// (the flag error names the flag instead), with what 0 means.
func fieldReason(f vdibroker.Field, err error) string {
	msg := strings.TrimPrefix(vdibroker.ErrorMessage(err), f.Path+": ")
	if f.Zero != "" && !strings.Contains(msg, "0 =") {
		msg += " (0: " + f.Zero + ")"
	}
	return msg
}

// flagOfField maps the JSON path of a host pool setting to its flag, so
// that a refusal by the broker names the flag the user typed.
func flagOfField(path string) (string, bool) {
	f, ok := vdibroker.PoolField(path)
	if !ok {
		return "", false
	}
	return "--" + flagName(f), true
}
