package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/metadatad/metadatad/internal/grpcclient"
)

// The command line keeps the standard flag package rather than
// peterbourgon/ff: what ff would add, the METADATAD_ variable of each flag,
// is the few lines of parseFlags, and ff's one variable prefix per parse
// (ff/v3's WithEnvVarPrefix, v3.4.0; ff/v4 is still v4.0.0-alpha) cannot
// give a command's connection flags, its own flags and the daemon's flags
// the three names envName gives them, nor read a renamed variable's old
// name with a warning; the checks that make it fail safe (a variable that
// names no flag of any command, a stray word) are metadatad's own either
// way; and the help keeps the format the deploy tests and operators read.

// envPrefix begins the environment variable of every flag.
const envPrefix = "METADATAD_"

// envName is the variable of a flag of command (the word after metadatad,
// "" or "serve" for the daemon). The daemon's flags have METADATAD_ and
// the flag's name in upper snake case (-data-dir is METADATAD_DATA_DIR),
// read by every command that has the flag, since it means the same there.
// So that a variable set for one command never changes another, a flag of
// the connection a command makes to -server has CLIENT_ after METADATAD_
// (-tls-ca is METADATAD_CLIENT_TLS_CA: the daemon's METADATAD_TLS_CERT is
// no client certificate), and any other flag of a command its command's
// name (copy's -to is METADATAD_COPY_TO).
func envName(command, flagName string) string {
	upper := strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
	switch {
	case command == "" || command == "serve":
		return envPrefix + upper
	case clientFlags()[flagName]:
		return envPrefix + "CLIENT_" + upper
	case daemonFlags()[flagName]:
		return envPrefix + upper
	default:
		return envPrefix + strings.ToUpper(command) + "_" + upper
	}
}

// legacyEnvName is the variable a command's flag had before envName
// qualified it (METADATAD_TO), still read, with a warning, for one
// release; "" when it has no other, or when the old name is the daemon's
// (METADATAD_TLS_CERT), which a command must not read.
func legacyEnvName(command, flagName string) string {
	old := envName("", flagName)
	if old == envName(command, flagName) || daemonFlags()[flagName] {
		return ""
	}
	return old
}

// commandOf is the command of the flag set fs: "backup" for "metadatad
// backup", "blobs" for "metadatad blobs audit", "" for the daemon's.
func commandOf(fs *flag.FlagSet) string {
	words := strings.Fields(strings.TrimPrefix(fs.Name(), "metadatad"))
	if len(words) == 0 {
		return ""
	}
	return words[0]
}

// daemonFlags and clientFlags are the flag names of the daemon and of a
// connection to it (grpcclient's).
var daemonFlags, clientFlags = sync.OnceValue(func() map[string]bool {
	fs := newFlagSet("metadatad")
	new(config).register(fs)
	return flagSet(fs)
}), sync.OnceValue(func() map[string]bool {
	fs := newFlagSet("client")
	new(grpcclient.Config).RegisterFlags(fs)
	return flagSet(fs)
})

func flagSet(fs *flag.FlagSet) map[string]bool {
	names := map[string]bool{}
	fs.VisitAll(func(f *flag.Flag) { names[f.Name] = true })
	return names
}

// noEnv are the flags no variable sets: a variable left in an environment
// must not turn the daemon into a command that prints and exits.
var noEnv = map[string]bool{"version": true}

// notFlags are the METADATAD_ variables that name no flag: those of the
// repository's own tools, which a developer's shell exports for the tests
// (internal/azurite), and the blob deleter's credential, a secret no flag
// should carry (ps shows command lines).
var notFlags = map[string]bool{
	"METADATAD_AZURITE_CONNECTION_STRING":      true,
	"METADATAD_AZURITE_BLOB_CONNECTION_STRING": true,
	envBlobConnectionString:                    true,
}

// usageError is a command line metadatad cannot run: an unknown word,
// flag or variable, a value out of range. It exits 2 with its message and
// a pointer to the command's help, not the whole help.
type usageError struct {
	// command is the command whose help explains it, e.g. "metadatad backup".
	command string
	err     error
}

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// usagef is a usage error of the command fs parses.
func usagef(fs *flag.FlagSet, format string, args ...any) error {
	return &usageError{command: fs.Name(), err: fmt.Errorf(format, args...)}
}

// asUsage makes err a usage error of command, unless it is one already
// or the help was asked for.
func asUsage(command string, err error) error {
	var u *usageError
	if err == nil || errors.Is(err, flag.ErrHelp) || errors.As(err, &u) {
		return err
	}
	return &usageError{command: command, err: err}
}

// exitCode reports err on stderr and returns the process's exit status:
// 0 for success or help, 2 for a usage error, 1 for any other failure.
func exitCode(err error, stderr io.Writer) int {
	var u *usageError
	switch {
	case err == nil || errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &u):
		fmt.Fprintf(stderr, "%s: %v\nRun '%s -h' for usage.\n", u.command, u.err, u.command)
		return 2
	default:
		fmt.Fprintln(stderr, "metadatad:", err)
		return 1
	}
}

// newFlagSet is the flag set of a command, "metadatad" or "metadatad NAME",
// which reports its errors to the caller instead of printing the usage.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parseFlags parses args into fs, then sets each flag not given from its
// METADATAD_ variable; a flag on the command line wins. It returns the
// names of the flags set either way. -h prints the command's help on out
// and returns flag.ErrHelp. An unknown flag, a positional argument or a
// METADATAD_ variable that names no flag of any command is a usage error
// naming the closest flag.
func parseFlags(fs *flag.FlagSet, args []string, out io.Writer) (set map[string]bool, err error) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printHelp(out, fs)
			return nil, err
		}
		if name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -"); ok {
			return nil, usagef(fs, "unknown flag -%s%s", name, didYouMean("-", name, flagNames(fs)))
		}
		return nil, usagef(fs, "%v", err)
	}
	if fs.NArg() > 0 {
		return nil, strayArgument(fs, fs.Arg(0))
	}
	if err := checkEnvironment(fs, os.Environ()); err != nil {
		return nil, err
	}
	set = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var envErr error
	command := commandOf(fs)
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] || noEnv[f.Name] || envErr != nil {
			return
		}
		name := envName(command, f.Name)
		v, ok := os.LookupEnv(name)
		if legacy := legacyEnvName(command, f.Name); !ok && legacy != "" {
			if v, ok = os.LookupEnv(legacy); ok {
				fmt.Fprintf(os.Stderr, "%s: $%s is read for this release only: set $%s instead\n", fs.Name(), legacy, name)
				name = legacy
			}
		}
		// f.Value.Set, not fs.Set: fs.Visit keeps listing the command
		// line alone, as the warning of a key in it and copy's rerun read it.
		if ok {
			if err := f.Value.Set(v); err != nil {
				envErr = usagef(fs, "$%s: %v", name, err)
			}
			set[f.Name] = true
		}
	})
	return set, envErr
}

// strayArgument is the usage error of a word where flags were expected.
func strayArgument(fs *flag.FlagSet, arg string) error {
	if _, ok := lookupCommand(arg); ok && fs.Name() == "metadatad" {
		return usagef(fs, "unexpected argument %q: a command comes first, as in metadatad %s -flags", arg, arg)
	}
	return usagef(fs, "unexpected argument %q: %s takes flags only", arg, fs.Name())
}

// checkEnvironment refuses a METADATAD_ variable of environ that names no
// flag of any command: a misspelt one would otherwise be ignored. A
// variable of another command's flag is left alone (the daemon's
// environment is inherited by the commands run beside it).
func checkEnvironment(fs *flag.FlagSet, environ []string) error {
	known := allVariables()
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, envPrefix) || notFlags[name] || known[name] != "" {
			continue
		}
		return usagef(fs, "$%s names no flag of metadatad%s", name, didYouMeanVariable(name, known))
	}
	return nil
}

// allVariables maps the variable of every flag of every command, those
// read for one more release included, to its flag.
func allVariables() map[string]string {
	vars := map[string]string{}
	for _, c := range commandList() {
		if c.flags == nil {
			continue
		}
		fs := newFlagSet(c.name)
		c.flags(fs)
		fs.VisitAll(func(f *flag.Flag) {
			if noEnv[f.Name] {
				return
			}
			vars[envName(c.name, f.Name)] = f.Name
			if legacy := legacyEnvName(c.name, f.Name); legacy != "" {
				vars[legacy] = f.Name
			}
		})
	}
	return vars
}

// didYouMeanVariable is " (did you mean $METADATAD_DATA_DIR, of
// -data-dir?)" for the known variable closest to name, or "".
func didYouMeanVariable(name string, known map[string]string) string {
	var names []string
	for v := range known {
		names = append(names, v)
	}
	slices.Sort(names)
	best := closest(name, names)
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean $%s, of -%s?)", best, known[best])
}

func flagNames(fs *flag.FlagSet) []string {
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	return names
}

// didYouMean is " (did you mean -listen?)" for the candidate closest to
// word, written with prefix, or "" when none is close.
func didYouMean(prefix, word string, candidates []string) string {
	best := closest(word, candidates)
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %s%s?)", prefix, best)
}

// closest is the candidate closest to word, or "" when none is close.
func closest(word string, candidates []string) string {
	best, bestDistance := "", len(word)/3+2
	for _, c := range candidates {
		if d := editDistance(word, c); d < bestDistance {
			best, bestDistance = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// printHelp prints the help of the command fs parses: its synopsis, for
// the daemon the commands, then each flag with its variable.
func printHelp(w io.Writer, fs *flag.FlagSet) {
	// The name may hold a verb after the command's, "metadatad blobs audit".
	words := strings.TrimPrefix(fs.Name(), "metadatad ")
	name, _, _ := strings.Cut(words, " ")
	if c, ok := lookupCommand(name); ok && fs.Name() != "metadatad" {
		fmt.Fprintf(w, "Usage: metadatad %s [flags]\n\n%s.\n\nFlags:\n", words, c.summary)
	} else {
		fmt.Fprint(w, "Usage: metadatad [serve] [flags]\n       metadatad COMMAND [flags]\n\n"+
			"metadatad serves camera image metadata over gRPC; without a command it serves.\n\nCommands:\n")
		for _, c := range commandList() {
			fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
		}
		fmt.Fprint(w, "\nRun 'metadatad COMMAND -h' for a command's flags.\n\nFlags of serve:\n")
	}
	fs.VisitAll(func(f *flag.Flag) {
		if !noEnv[f.Name] {
			f.Usage += " ($" + envName(commandOf(fs), f.Name) + ")"
		}
		// A default that depends on the store or the machine is stated in
		// the flag's own words; the value the flag package would add is
		// only this process's, a second default that contradicts them.
		if strings.Contains(f.Usage, "(default ") {
			f.DefValue = zeroValue(f)
		}
	})
	fs.SetOutput(w)
	fs.PrintDefaults()
	fmt.Fprint(w, "\nEnvironment:\n  Each flag has the variable shown; a flag on the command line wins. The server's flags have\n"+
		"  METADATAD_ and the name in upper snake case, read by every command that has the flag; the\n"+
		"  flags of a command's connection to -server METADATAD_CLIENT_, and a command's own flags\n"+
		"  its name (METADATAD_COPY_TO). A METADATAD_ variable that names no flag of any command is\n"+
		"  an error.\n")
}

// zeroValue is the text of the zero value of f's type, which PrintDefaults
// takes for "no default to print".
func zeroValue(f *flag.Flag) string {
	typ := reflect.TypeOf(f.Value)
	if typ.Kind() != reflect.Pointer {
		return ""
	}
	return reflect.New(typ.Elem()).Interface().(flag.Value).String()
}

// isHelpFlag says whether arg asks for help, as the flag package takes it.
func isHelpFlag(arg string) bool {
	switch arg {
	case "-h", "-help", "--h", "--help":
		return true
	}
	return false
}
