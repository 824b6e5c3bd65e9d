package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// docCommand is one `vdibroker ...` command line the documentation shows.
type docCommand struct {
	where string   // file:line
	words []string // the words after "vdibroker"
	table bool     // from a Markdown table: "\|" separates alternatives
}

// docFiles are the files whose command lines must name existing commands
// and flags: what an administrator follows.
func docFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append(files, "../../README.md", "../../BENCHMARKS.md")
}

var (
	// fence opens or closes a fenced code block; its info string says the
	// language.
	fence = regexp.MustCompile("^\\s*(```+|~~~+)\\s*([A-Za-z0-9_-]*)")
	// codeSpan is an inline code span.
	codeSpan = regexp.MustCompile("`([^`]+)`")
	// binary is the binary's name followed by a word, perhaps behind a path.
	binary = regexp.MustCompile(`(?:^|[^A-Za-z0-9_-])vdibroker(?:\.exe)?\s+((?:[a-z]|--[a-z]).*)$`)
	// quotedPath is the binary's name in a quoted path:
	// & 'C:\Program Files\vdibroker\vdibroker.exe' agent install.
	quotedPath = regexp.MustCompile(`'[^']*[/\\]vdibroker(?:\.exe)?'|"[^"]*[/\\]vdibroker(?:\.exe)?"`)
	// envAssignment is VAR=value before a command (or systemd's ExecStart=).
	envAssignment = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)
)

// findCommand returns what follows the binary's name where a line runs it:
// at the start of the line, after a prompt, env assignments, sudo, "go
// run", or a shell operator; the name may carry a path.
func findCommand(line string) (string, bool) {
	line = quotedPath.ReplaceAllString(line, "vdibroker")
	m := binary.FindStringSubmatchIndex(line)
	if m == nil {
		return "", false
	}
	before := line[:m[0]+1]
	if m[0] == 0 {
		before = ""
	}
	// The path the name carries: ./, /usr/local/bin/, .\\.
	before = strings.TrimRightFunc(before, func(r rune) bool { return !strings.ContainsRune(" \t|&;($", r) })
	before = strings.TrimSpace(before)
	words := strings.Fields(before)
	switch {
	case before == "", strings.HasSuffix(before, "$"), strings.HasSuffix(before, "|"),
		strings.HasSuffix(before, "&"), strings.HasSuffix(before, ";"), strings.HasSuffix(before, "("),
		strings.HasSuffix(before, "$("), strings.HasSuffix(before, "#"):
	case slices.Contains([]string{"sudo", "exec", "run", "time", "PS>", ">", "=", "&"}, words[len(words)-1]):
	case envAssignment.MatchString(words[len(words)-1]):
	default:
		return "", false
	}
	return line[m[2]:m[3]], true
}

// shellWords splits a command line as a shell would: quotes and
// backslashes; in a shell block an operator (| & ; > <) or a comment ends
// the command. In prose "|" separates alternatives, written "\\|" in a
// table.
func shellWords(line string, shell, table bool) []string {
	var words []string
	var cur strings.Builder
	inWord := false
	flush := func() {
		if inWord {
			words = append(words, cur.String())
		}
		cur.Reset()
		inWord = false
	}
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == '\'':
			j := strings.IndexByte(line[i+1:], '\'')
			if j < 0 {
				j = len(line) - i - 1
			}
			cur.WriteString(line[i+1 : i+1+j])
			inWord = true
			i += j + 1
		case c == '"':
			j := strings.IndexByte(line[i+1:], '"')
			if j < 0 {
				j = len(line) - i - 1
			}
			cur.WriteString(line[i+1 : i+1+j])
			inWord = true
			i += j + 1
		case c == '\\' && table && i+1 < len(line) && line[i+1] == '|':
			cur.WriteByte('|')
			inWord = true
			i++
		case c == '\\' && i+1 < len(line):
			cur.WriteByte(line[i+1])
			inWord = true
			i++
		case c == ' ' || c == '\t':
			flush()
		case shell && strings.IndexByte("|&;)", c) >= 0,
			// A comment, or a redirection; <placeholder> is not one.
			shell && !inWord && (c == '#' || c == '>'),
			shell && !inWord && c == '<' && (i+1 == len(line) || line[i+1] == ' ' || line[i+1] == '('):
			flush()
			return words
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	flush()
	return words
}

// docCommands returns every vdibroker command line of the documentation:
// in shell code blocks (continued lines joined), in inline code spans, and
// the first column of docs/cli.md's table of commands, which leaves the
// binary's name out.
func docCommands(t *testing.T) []docCommand {
	t.Helper()
	var cmds []docCommand
	for _, file := range docFiles(t) {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(filepath.ToSlash(file), "../../")
		lines := strings.Split(string(b), "\n")
		inFence, shellFence, inCommands := false, false, false
		for i := 0; i < len(lines); i++ {
			line := lines[i]
			where := name + ":" + itoa(i+1)
			if m := fence.FindStringSubmatch(line); m != nil {
				if inFence {
					inFence = false
					continue
				}
				inFence = true
				switch m[2] {
				case "", "sh", "bash", "shell", "console", "text", "powershell", "ps1", "cmd":
					shellFence = true
				default: // yaml, json, promql, ini, go...: no command lines
					shellFence = false
				}
				continue
			}
			if inFence {
				if !shellFence {
					continue
				}
				for strings.HasSuffix(line, "\\") && i+1 < len(lines) {
					i++
					line = strings.TrimSuffix(line, "\\") + " " + lines[i]
				}
				for strings.HasSuffix(line, "`") && i+1 < len(lines) { // PowerShell
					i++
					line = strings.TrimSuffix(line, "`") + " " + lines[i]
				}
				// A mistyped command shown for the error it gets.
				if i+1 < len(lines) && strings.Contains(lines[i+1], "error: unknown command") {
					continue
				}
				if rest, ok := findCommand(line); ok {
					cmds = append(cmds, docCommand{where: where, words: shellWords(rest, true, false)})
				}
				continue
			}
			if strings.HasPrefix(line, "#") {
				inCommands = name == "docs/cli.md" && strings.TrimSpace(line) == "## Commands"
			}
			table := strings.HasPrefix(line, "|")
			if inCommands && table {
				cells := strings.Split(strings.ReplaceAll(line, `\|`, "\x00"), "|")
				if len(cells) > 2 {
					first := strings.ReplaceAll(cells[1], "\x00", `\|`)
					for _, s := range codeSpan.FindAllStringSubmatch(first, -1) {
						cmds = append(cmds, docCommand{where: where, words: shellWords(s[1], false, true), table: true})
					}
				}
				continue
			}
			for _, s := range codeSpan.FindAllStringSubmatch(line, -1) {
				if rest, ok := findCommand(s[1]); ok {
					cmds = append(cmds, docCommand{where: where, words: shellWords(rest, false, table), table: table})
				}
			}
		}
	}
	return cmds
}

func itoa(n int) string {
	const digits = "0123456789"
	if n < 10 {
		return digits[n : n+1]
	}
	return itoa(n/10) + digits[n%10:n%10+1]
}

// placeholder reports whether a word stands for something the reader
// supplies rather than a subcommand: SHELL, ..., [flags], <tenant id>.
func placeholder(w string) bool {
	if w == "" || strings.ContainsAny(w, "[]<>.…$") {
		return true
	}
	return strings.ToUpper(w) == w
}

// checkDocCommand walks the words of a command line down cobra's tree and
// returns what in them does not exist: a subcommand or a flag.
func checkDocCommand(root *cobra.Command, words []string) (problems []string) {
	cmd := root
	i := 0
	// Flags before the subcommand (vdibroker --token T hostpool list) are
	// the subcommand's: checked once it is found.
	var leading []string
	for i < len(words) && strings.HasPrefix(words[i], "--") {
		leading = append(leading, words[i])
		if i+1 < len(words) && !strings.Contains(words[i], "=") && findChild(root, words[i+1]) == nil {
			leading = append(leading, words[i+1])
			i++
		}
		i++
	}
	defer func() {
		if len(leading) > 0 && cmd != root {
			problems = append(problems, checkFlags(cmd, leading)...)
		}
	}()
	// Subcommands: each word names a child until a flag or an argument.
	for ; i < len(words); i++ {
		w := strings.Trim(words[i], "()[]")
		if strings.HasPrefix(w, "-") || !cmd.HasSubCommands() {
			break
		}
		if placeholder(w) {
			return problems
		}
		if strings.Contains(w, "|") {
			// Alternatives: each must be a child; their flags differ.
			for _, alt := range strings.Split(strings.Trim(w, "()[]"), "|") {
				if c := findChild(cmd, alt); c == nil {
					problems = append(problems, "no command "+cmd.CommandPath()+" "+alt)
				}
			}
			return problems
		}
		c := findChild(cmd, w)
		if c == nil {
			return append(problems, "no command "+cmd.CommandPath()+" "+w)
		}
		cmd = c
	}
	return append(problems, checkFlags(cmd, words[i:])...)
}

// checkFlags returns the flags among words that cmd does not have (its own
// or inherited), skipping each flag's value.
func checkFlags(cmd *cobra.Command, words []string) []string {
	var problems []string
	for i := 0; i < len(words); i++ {
		w := strings.TrimLeft(words[i], "([")
		if !strings.HasPrefix(w, "-") || w == "-" || w == "--" {
			continue
		}
		w = strings.TrimRight(w, ")]")
		var f *pflag.Flag
		name, _, hasValue := strings.Cut(w, "=")
		switch {
		case strings.HasPrefix(name, "--"):
			// "--target/--principal/--action": each of them.
			for _, n := range strings.Split(name, "/") {
				n = strings.TrimPrefix(n, "--")
				if f = cmd.Flags().Lookup(n); f == nil {
					problems = append(problems, cmd.CommandPath()+" has no flag --"+n)
				}
			}
		case len(name) == 2:
			if f = cmd.Flags().ShorthandLookup(name[1:]); f == nil {
				problems = append(problems, cmd.CommandPath()+" has no flag "+name)
			}
		default:
			problems = append(problems, cmd.CommandPath()+": "+name+" is not a flag (one dash)")
		}
		if f != nil && !hasValue && f.NoOptDefVal == "" && !strings.ContainsAny(words[i], ")]") {
			i++ // its value
		}
	}
	return problems
}

// findChild is the subcommand of cmd named or aliased name.
func findChild(cmd *cobra.Command, name string) *cobra.Command {
	for _, c := range cmd.Commands() {
		if c.Name() == name || c.HasAlias(name) {
			return c
		}
	}
	return nil
}

// TestDocsCommandLinesExist: every `vdibroker ...` command line the
// documentation shows (README.md, docs/*.md: code blocks, inline code, the
// table of docs/cli.md) names subcommands and flags the binary has, so an
// administrator who types it as written is not told "unknown flag".
func TestDocsCommandLinesExist(t *testing.T) {
	initDocRoot()
	cmds := docCommands(t)
	if len(cmds) < 100 {
		t.Fatalf("found only %d command lines in the documentation; is the parser looking in the right place?", len(cmds))
	}
	for _, c := range cmds {
		for _, p := range checkDocCommand(rootCmd, c.words) {
			t.Errorf("%s: vdibroker %s: %s", c.where, strings.Join(c.words, " "), p)
		}
	}
}

// initDocRoot completes the command tree as cobra does when it runs: the
// help and completion commands and every command's --help.
func initDocRoot() {
	groupCommands(rootCmd)
	rootCmd.InitDefaultCompletionCmd()
	rootCmd.InitDefaultHelpCmd()
	var helpFlags func(*cobra.Command)
	helpFlags = func(c *cobra.Command) {
		c.InitDefaultHelpFlag()
		for _, sub := range c.Commands() {
			helpFlags(sub)
		}
	}
	helpFlags(rootCmd)
}

// TestCheckDocCommand: the check finds a mistyped subcommand or flag, in
// a shell block and in prose, and takes placeholders, alternatives and
// flag values for what they are.
func TestCheckDocCommand(t *testing.T) {
	initDocRoot()
	for _, tc := range []struct {
		line         string
		shell, table bool
		want         string
	}{
		{"vdibroker hostpool update --name P --max-session-limit 10", true, false, ""},
		{"$ ./vdibroker hostpool lst", true, false, "no command vdibroker hostpool lst"},
		{"vdibroker hostpool update --nam P", true, false, "vdibroker hostpool update has no flag --nam"},
		{"sudo vdibroker sessionhost update --host-pool P --name H --drain true # comment --x", true, false, "has no flag --drain"},
		{"vdibroker sessionhost update ... --allow-new-session true", false, false, ""},
		{`vdibroker sessionhost start\|stop`, false, true, ""},
		{`vdibroker sessionhost start\|halt`, false, true, "no command vdibroker sessionhost halt"},
		{"vdibroker usersession logoff --host-pool P (--id ID | --user U) [--forc]", false, false, "has no flag --forc"},
		{"vdibroker audit list --target/--principal/--actions ''", false, false, "has no flag --actions"},
		{"vdibroker completion SHELL --help", false, false, ""},
		{"source <(vdibroker completion bash) --nonsense", true, false, ""},
		{"vdibroker hostpool list -x", false, false, "has no flag -x"},
		{"systemctl reload vdibroker", true, false, ""},
		{"cat vdibroker-data/admin.token", true, false, ""},
		{"vdibroker --token … hostpool list", false, false, ""},
		{"vdibroker --tokn … hostpool list", false, false, "vdibroker hostpool list has no flag --tokn"},
	} {
		rest, ok := findCommand(tc.line)
		var got []string
		if ok {
			got = checkDocCommand(rootCmd, shellWords(rest, tc.shell, tc.table))
		}
		if tc.want == "" && len(got) > 0 || tc.want != "" && (len(got) != 1 || !strings.Contains(got[0], tc.want)) {
			t.Errorf("%s: got %q, want %q", tc.line, got, tc.want)
		}
	}
}

// TestDocsHostPoolFieldFlags: docs/cli.md's "Host pool field flags" names
// every setting flag of hostpool create and update, and no other, so a new
// pool setting's flag is documented where an administrator looks for it.
func TestDocsHostPoolFieldFlags(t *testing.T) {
	initDocRoot()
	b, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	_, para, ok := strings.Cut(string(b), "Host pool field flags:")
	para, _, _ = strings.Cut(para, "\n\n")
	if !ok {
		t.Fatal(`docs/cli.md has no "Host pool field flags:" paragraph`)
	}
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("`--([a-z-]+)`").FindAllStringSubmatch(para, -1) {
		documented[m[1]] = true
	}
	for _, path := range [][]string{{"hostpool", "create"}, {"hostpool", "update"}} {
		cmd, _, err := rootCmd.Find(path)
		if err != nil {
			t.Fatal(err)
		}
		cmd.LocalNonPersistentFlags().VisitAll(func(f *pflag.Flag) {
			if f.Name == "name" || f.Name == "help" {
				return
			}
			if !documented[f.Name] {
				t.Errorf("vdibroker %s --%s is not among docs/cli.md's host pool field flags", strings.Join(path, " "), f.Name)
			}
		})
		for name := range documented {
			if cmd.Flags().Lookup(name) == nil {
				t.Errorf("docs/cli.md's host pool field flags name --%s, which vdibroker %s does not have", name, strings.Join(path, " "))
			}
		}
	}
}
