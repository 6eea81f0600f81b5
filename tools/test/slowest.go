package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// slowestShown is how many of the slowest tests the run lists at its end,
// so that the next slowdown is seen in the change that brings it.
const slowestShown = 20

// testEvent is the part of a `go test -json` event (cmd/test2json) this
// tool reads.
type testEvent struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

// timing is one top-level test's or one package's time.
type timing struct {
	name    string
	elapsed time.Duration
}

// timings reads `go test -json` from r and returns the time of every
// top-level test and of every package that ran, slowest first. It writes
// to w what `go test` without -json would: a package's line when it
// passes, and, when it fails, everything its tests printed (-json runs
// them verbosely). Lines that are not events (the go command's own
// messages) are written as they are.
func timings(r io.Reader, w io.Writer) (tests, packages []timing, err error) {
	// outputs are each running package's output, kept until it ends.
	outputs := map[string]*strings.Builder{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e testEvent
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			if _, err := fmt.Fprintf(w, "%s\n", line); err != nil {
				return nil, nil, err
			}
			continue
		}
		out := outputs[e.Package]
		if out == nil {
			out = &strings.Builder{}
			outputs[e.Package] = out
		}
		out.WriteString(e.Output)
		if e.Test == "" && (e.Action == "pass" || e.Action == "skip" || e.Action == "fail") {
			delete(outputs, e.Package)
			shown := out.String()
			if e.Action != "fail" {
				shown = summary(shown)
			}
			if _, err := io.WriteString(w, shown); err != nil {
				return nil, nil, err
			}
		}
		if e.Action != "pass" && e.Action != "fail" {
			continue
		}
		elapsed := time.Duration(e.Elapsed * float64(time.Second))
		switch {
		case e.Test == "":
			packages = append(packages, timing{e.Package, elapsed})
		case !strings.Contains(e.Test, "/"):
			tests = append(tests, timing{e.Package + " " + e.Test, elapsed})
		}
	}
	slowestFirst := func(a, b timing) int { return int(b.elapsed - a.elapsed) }
	slices.SortStableFunc(tests, slowestFirst)
	slices.SortStableFunc(packages, slowestFirst)
	return tests, packages, sc.Err()
}

// summary is the line go test prints for a package that passed (or has no
// tests), out of everything it printed.
func summary(output string) string {
	var b strings.Builder
	for line := range strings.Lines(output) {
		if strings.HasPrefix(line, "ok  \t") || strings.HasPrefix(line, "?   \t") {
			b.WriteString(line)
		}
	}
	return b.String()
}

// printTimings lists the packages' times and the slowest tests.
func printTimings(w io.Writer, tests, packages []timing) {
	step("packages by time")
	for _, p := range packages {
		fmt.Fprintf(w, "%9.1fs  %s\n", p.elapsed.Seconds(), p.name)
	}
	step(fmt.Sprintf("the %d slowest tests", slowestShown))
	for _, t := range tests[:min(slowestShown, len(tests))] {
		fmt.Fprintf(w, "%9.1fs  %s\n", t.elapsed.Seconds(), t.name)
	}
}
