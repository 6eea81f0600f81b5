package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

func main() {
	o, err := parseFlags(os.Args[1:], os.Stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		os.Exit(0)
	case err != nil:
		os.Exit(2) // the flag package has printed the error and the usage
	}
	if err := run(o.race, o.fuzzTime, o.timeout); err != nil {
		fmt.Fprintln(os.Stderr, "tools/test:", err)
		os.Exit(1)
	}
}

// options are the command's flags.
type options struct {
	race              bool
	fuzzTime, timeout time.Duration
}

// parseFlags parses the command's flags, printing its usage on out for -h
// or a bad flag. The usage names the command as a user runs it: the flag
// package's default names os.Args[0], which under go run is a binary in a
// temporary directory.
func parseFlags(args []string, out io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("go run ./tools/test", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.BoolVar(&o.race, "race", true, "run the suites with the race detector")
	fs.DurationVar(&o.fuzzTime, "fuzztime", 10*time.Second, "how long each fuzz target runs; 0 runs only their seed corpora, as the suites do")
	fs.DurationVar(&o.timeout, "timeout", 60*time.Minute, "the go test -timeout of each package")
	fs.Usage = func() {
		fmt.Fprintf(out, "Usage: %s [flags]\n\nRuns every test suite of this repository as CI does, then each fuzz target for -fuzztime.\n\nFlags:\n", fs.Name())
		fs.PrintDefaults()
	}
	return o, fs.Parse(args)
}

func run(race bool, fuzzTime, timeout time.Duration) error {
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	if err := os.Chdir(root); err != nil {
		return err
	}
	for _, p := range []struct{ dir, pkg string }{{"tools/azurite", "azurite"}, {"examples/node", "@grpc/grpc-js"}} {
		if err := installPackages(filepath.Join(root, filepath.FromSlash(p.dir)), p.pkg); err != nil {
			return err
		}
	}
	// Every suite that needs a service fails instead of skipping.
	if err := os.Setenv("CI", "true"); err != nil {
		return err
	}
	args := []string{"test", "-count=1", "-timeout=" + timeout.String()}
	if race {
		args = append(args, "-race")
	}
	step("go " + strings.Join(append(args, testOrder...), " "))
	if err := testAll(append(append(args, "-json"), testOrder...)); err != nil {
		return fmt.Errorf("tests failed: %w", err)
	}
	if fuzzTime <= 0 {
		return nil
	}
	targets, err := fuzzTargets()
	if err != nil {
		return err
	}
	for _, target := range targets {
		if err := fuzz(target, fuzzTime); err != nil {
			return err
		}
	}
	return nil
}

// testOrder is the packages as go test is given them: those whose suites
// take minutes first (the queue design's crash loops on Azurite, the built
// binary's README examples, the daemon's kill and full-disk tests, the
// server on both backends), then every other. go test starts packages in
// the order given, as many at once as the machine has cores: in the
// alphabetical order of ./... the slowest, store/retention/queue, started
// last and ran alone for minutes.
var testOrder = []string{"./store/retention/queue", "./deploy", "./cmd/metadatad", "./server", "./..."}

// testAll runs go test with args (-json among them), printing the tests'
// output as it comes and, at the end, the packages' times and the slowest
// tests, failed or not.
func testAll(args []string) error {
	cmd := exec.Command("go", args...)
	cmd.Stderr = os.Stderr
	events, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	tests, packages, readErr := timings(events, os.Stdout)
	if readErr != nil {
		_, _ = io.Copy(io.Discard, events) // let go test finish writing
	}
	err = cmd.Wait()
	printTimings(os.Stdout, tests, packages)
	return errors.Join(err, readErr)
}

// fuzz runs one fuzz target for fuzzTime. Go 1.26's fuzz coordinator can
// fail a target with a bare "context deadline exceeded" as -fuzztime runs
// out, when a loaded machine keeps a worker from answering in time
// (go.dev/issue/75804, fixed in Go 1.27). Such a run found nothing: any
// input that fails the target is written under testdata/fuzz first. So a
// run that fails that way and wrote no input is run once more, and passes
// if it fails the same way again; every other failure fails.
func fuzz(target fuzzTarget, fuzzTime time.Duration) error {
	corpus, err := corpusDir(target)
	if err != nil {
		return err
	}
	for attempt := 1; ; attempt++ {
		step(fmt.Sprintf("fuzz %s %s for %s", target.pkg, target.name, fuzzTime))
		before, err := inputs(corpus)
		if err != nil {
			return err
		}
		var tail tailBuffer
		cmd := command("go", "test", "-run=^$", "-fuzz=^"+target.name+"$", "-fuzztime="+fuzzTime.String(), target.pkg)
		// One writer for both streams, so exec writes to it from one goroutine.
		out := io.MultiWriter(os.Stdout, &tail)
		cmd.Stdout, cmd.Stderr = out, out
		runErr := cmd.Run()
		if runErr == nil {
			return nil
		}
		after, err := inputs(corpus)
		if err != nil {
			return err
		}
		if !coordinatorDeadlineRace(tail.String()) || after > before {
			return fmt.Errorf("fuzz target %s in %s failed (its failing input is under %s): %w", target.name, target.pkg, corpus, runErr)
		}
		step(fmt.Sprintf("fuzz %s: %q at the end of -fuzztime with no failing input written: Go's fuzz coordinator race (go.dev/issue/75804), not a finding", target.name, coordinatorDeadlineMessage))
		if attempt == 2 {
			return nil
		}
	}
}

// coordinatorDeadlineMessage is the whole failure Go's fuzz coordinator
// prints when its -fuzztime deadline races a worker.
const coordinatorDeadlineMessage = "context deadline exceeded"

// coordinatorDeadlineRace reports whether a failed fuzz run's output is that
// of the coordinator's deadline race: the target's failure is the bare
// deadline message, and no input was found failing.
func coordinatorDeadlineRace(output string) bool {
	lines := strings.Split(output, "\n")
	for i, line := range lines {
		if strings.HasPrefix(line, "--- FAIL: Fuzz") {
			return i+1 < len(lines) && strings.TrimSpace(lines[i+1]) == coordinatorDeadlineMessage &&
				!strings.Contains(output, "Failing input written")
		}
	}
	return false
}

// corpusDir is the folder where go test writes a target's failing inputs.
func corpusDir(target fuzzTarget) (string, error) {
	out, err := exec.Command("go", "list", "-f", "{{.Dir}}", target.pkg).Output()
	if err != nil {
		return "", fmt.Errorf("go list %s: %w", target.pkg, err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "testdata", "fuzz", target.name), nil
}

// inputs counts the inputs under a corpus folder; a missing folder has none.
func inputs(dir string) (int, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	return len(entries), err
}

// tailBuffer keeps the last 64 KiB written to it: enough for the end of a
// fuzz run's output, bounded however long the run talks.
type tailBuffer struct{ buf []byte }

const tailBytes = 64 << 10

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	if len(t.buf) > tailBytes {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-tailBytes:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return string(t.buf) }

// installPackages runs `npm ci` in dir unless node_modules already holds
// the version of pkg its package-lock.json pins. It never reinstalls a
// matching copy: node_modules may be a link shared with another checkout.
// Two directories use it: tools/azurite (Azurite, for the Azure suites)
// and examples/node (the Node client example's gRPC packages).
func installPackages(dir, pkg string) error {
	want, err := lockedVersion(filepath.Join(dir, "package-lock.json"), pkg)
	if err != nil {
		return err
	}
	have, err := packageVersion(filepath.Join(dir, "node_modules", pkg, "package.json"))
	switch {
	case err == nil && have == want:
		step(pkg + " " + have + " is installed under " + dir)
		return nil
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return err
	}
	step("installing " + pkg + " " + want + " under " + dir + " (npm ci)")
	if err := command("npm", "ci", "--prefix", dir, "--no-audit", "--no-fund", "--loglevel=error").Run(); err != nil {
		return fmt.Errorf("npm ci in %s (Node 20 or later is needed): %w", dir, err)
	}
	return nil
}

// lockedVersion is the version of pkg a package-lock.json pins.
func lockedVersion(lockFile, pkg string) (string, error) {
	data, err := os.ReadFile(lockFile)
	if err != nil {
		return "", err
	}
	var lock struct {
		Packages map[string]struct {
			Version string `json:"version"`
		} `json:"packages"`
	}
	if err := json.Unmarshal(data, &lock); err != nil {
		return "", fmt.Errorf("%s: %w", lockFile, err)
	}
	v := lock.Packages["node_modules/"+pkg].Version
	if v == "" {
		return "", fmt.Errorf("%s pins no %s version", lockFile, pkg)
	}
	return v, nil
}

// packageVersion is the version a package.json declares.
func packageVersion(file string) (string, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	var pkg struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(data, &pkg); err != nil {
		return "", fmt.Errorf("%s: %w", file, err)
	}
	return pkg.Version, nil
}

// fuzzTarget is one Fuzz function of a package.
type fuzzTarget struct{ pkg, name string }

// fuzzTargets lists every fuzz target of the module: each Fuzz function
// of a _test.go file, read from the source. (`go test -list` compiled every
// package's tests once more, without -race: minutes on a fresh machine.)
func fuzzTargets() ([]fuzzTarget, error) {
	var out bytes.Buffer
	cmd := command("go", "list", "-f", "{{.ImportPath}}\t{{.Dir}}\t{{join .TestGoFiles \",\"}},{{join .XTestGoFiles \",\"}}", "./...")
	cmd.Stdout = &out
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("listing packages: %w", err)
	}
	var targets []fuzzTarget
	scanner := bufio.NewScanner(&out)
	for scanner.Scan() {
		fields := strings.Split(scanner.Text(), "\t")
		if len(fields) != 3 {
			continue
		}
		for _, file := range strings.Split(fields[2], ",") {
			if file == "" {
				continue
			}
			names, err := fuzzFuncs(filepath.Join(fields[1], file))
			if err != nil {
				return nil, err
			}
			for _, name := range names {
				targets = append(targets, fuzzTarget{pkg: fields[0], name: name})
			}
		}
	}
	return targets, scanner.Err()
}

// fuzzFuncs are the fuzz targets a test file declares: functions named
// Fuzz... that take a *testing.F, as go test finds them.
func fuzzFuncs(file string) ([]string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, decl := range f.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "Fuzz") || len(fn.Type.Params.List) != 1 {
			continue
		}
		star, ok := fn.Type.Params.List[0].Type.(*ast.StarExpr)
		if !ok {
			continue
		}
		if sel, ok := star.X.(*ast.SelectorExpr); ok && sel.Sel.Name == "F" {
			names = append(names, fn.Name.Name)
		}
	}
	return names, nil
}

// moduleRoot is the folder of the main module's go.mod.
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("run it inside the metadatad module")
	}
	return filepath.Dir(gomod), nil
}

func command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	return cmd
}

func step(what string) { fmt.Println("==", what) }
