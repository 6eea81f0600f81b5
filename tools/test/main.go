package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

func main() {
	race := flag.Bool("race", true, "run the suites with the race detector")
	fuzzTime := flag.Duration("fuzztime", 10*time.Second, "how long each fuzz target runs; 0 runs only their seed corpora, as the suites do")
	timeout := flag.Duration("timeout", 60*time.Minute, "the go test -timeout of each package")
	flag.Parse()
	if err := run(*race, *fuzzTime, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "tools/test:", err)
		os.Exit(1)
	}
}

func run(race bool, fuzzTime, timeout time.Duration) error {
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	if err := os.Chdir(root); err != nil {
		return err
	}
	if err := installAzurite(filepath.Join(root, "tools", "azurite")); err != nil {
		return err
	}
	// Every suite that needs a service fails instead of skipping.
	if err := os.Setenv("CI", "true"); err != nil {
		return err
	}
	args := []string{"test", "-count=1", "-timeout=" + timeout.String()}
	if race {
		args = append(args, "-race")
	}
	step("go " + strings.Join(append(args, "./..."), " "))
	if err := command("go", append(args, "./...")...).Run(); err != nil {
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
		step(fmt.Sprintf("fuzz %s %s for %s", target.pkg, target.name, fuzzTime))
		cmd := command("go", "test", "-run=^$", "-fuzz=^"+target.name+"$", "-fuzztime="+fuzzTime.String(), target.pkg)
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("fuzz target %s in %s failed (its failing input is under testdata/fuzz): %w", target.name, target.pkg, err)
		}
	}
	return nil
}

// installAzurite runs `npm ci` in dir unless node_modules already holds the
// Azurite version package-lock.json pins. It never reinstalls a matching
// copy: node_modules may be a link shared with another checkout.
func installAzurite(dir string) error {
	want, err := lockedAzuriteVersion(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		return err
	}
	have, err := packageVersion(filepath.Join(dir, "node_modules", "azurite", "package.json"))
	switch {
	case err == nil && have == want:
		step("Azurite " + have + " is installed under tools/azurite")
		return nil
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return err
	}
	step("installing Azurite " + want + " under tools/azurite (npm ci)")
	if err := command("npm", "ci", "--prefix", dir, "--no-audit", "--no-fund", "--loglevel=error").Run(); err != nil {
		return fmt.Errorf("npm ci in tools/azurite (Node 20 or later is needed): %w", err)
	}
	return nil
}

// lockedAzuriteVersion is the Azurite version a package-lock.json pins.
func lockedAzuriteVersion(lockFile string) (string, error) {
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
	v := lock.Packages["node_modules/azurite"].Version
	if v == "" {
		return "", fmt.Errorf("%s pins no azurite version", lockFile)
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

// fuzzTargets lists every fuzz target of the module, as `go test -list` sees them.
func fuzzTargets() ([]fuzzTarget, error) {
	var out bytes.Buffer
	cmd := command("go", "test", "-list=^Fuzz", "./...")
	cmd.Stdout = &out
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("listing fuzz targets: %w", err)
	}
	var targets []fuzzTarget
	var names []string
	scanner := bufio.NewScanner(&out)
	for scanner.Scan() {
		fields := strings.Fields(scanner.Text())
		switch {
		case len(fields) == 1 && strings.HasPrefix(fields[0], "Fuzz"):
			names = append(names, fields[0])
		case len(fields) >= 2 && fields[0] == "ok":
			// "ok <package> <time>" ends the listing of one package.
			for _, name := range names {
				targets = append(targets, fuzzTarget{pkg: fields[1], name: name})
			}
			names = nil
		}
	}
	return targets, scanner.Err()
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
