package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestCoordinatorDeadlineRace(t *testing.T) {
	for _, tc := range []struct {
		name   string
		output string
		want   bool
	}{
		{
			name: "the race as CI printed it",
			output: `fuzz: elapsed: 9s, execs: 128986 (0/sec), new interesting: 58 (total: 64)
fuzz: elapsed: 11s, execs: 128986 (0/sec), new interesting: 58 (total: 64)
--- FAIL: FuzzTimeFromInvertedTicksRowKey (11.03s)
    context deadline exceeded
FAIL
exit status 1
FAIL	github.com/metadatad/metadatad/store	11.045s
`,
			want: true,
		},
		{
			name: "a failing input",
			output: `--- FAIL: FuzzDecodeValue (0.51s)
    --- FAIL: FuzzDecodeValue (0.00s)
        value_fuzz_test.go:40: round trip differs

    Failing input written to testdata/fuzz/FuzzDecodeValue/582528ddfad69eb5
    To re-run:
    go test -run=FuzzDecodeValue/582528ddfad69eb5
FAIL
`,
			want: false,
		},
		{
			name: "a target that fails on a deadline of its own",
			output: `--- FAIL: FuzzRequests (3.00s)
    --- FAIL: FuzzRequests (0.10s)
        fuzz_test.go:88: context deadline exceeded

    Failing input written to testdata/fuzz/FuzzRequests/1d2f
FAIL
`,
			want: false,
		},
		{
			name: "a worker that died",
			output: `--- FAIL: FuzzPartitionKey (2.00s)
    fuzzing process hung or terminated unexpectedly: exit status 2
FAIL
`,
			want: false,
		},
		{name: "a build failure", output: "store/keys.go:3:1: syntax error\nFAIL\tgithub.com/metadatad/metadatad/store [build failed]\n", want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := coordinatorDeadlineRace(tc.output); got != tc.want {
				t.Errorf("coordinatorDeadlineRace = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestTailBufferKeepsTheEnd(t *testing.T) {
	var tail tailBuffer
	chunk := make([]byte, 1000)
	for i := range chunk {
		chunk[i] = 'a'
	}
	for range 100 {
		tail.Write(chunk)
	}
	tail.Write([]byte("the end"))
	got := tail.String()
	if len(got) != tailBytes {
		t.Fatalf("kept %d bytes, want %d", len(got), tailBytes)
	}
	if got[len(got)-7:] != "the end" {
		t.Fatalf("the last bytes written are gone: %q", got[len(got)-20:])
	}
}

// TestTimings: from go test -json, the passing package shows only its ok
// line, the failing one everything its tests printed, the go command's own
// lines pass through, and the times come back slowest first, top-level
// tests only.
func TestTimings(t *testing.T) {
	events := `{"Action":"start","Package":"m/a"}
{"Action":"run","Package":"m/a","Test":"TestQuick"}
{"Action":"output","Package":"m/a","Test":"TestQuick","Output":"=== RUN   TestQuick\n"}
{"Action":"output","Package":"m/a","Test":"TestQuick","Output":"--- PASS: TestQuick (0.10s)\n"}
{"Action":"pass","Package":"m/a","Test":"TestQuick","Elapsed":0.1}
{"Action":"start","Package":"m/b"}
{"Action":"output","Package":"m/b","Test":"TestBroken/case","Output":"    b_test.go:9: want 1, got 2\n"}
{"Action":"fail","Package":"m/b","Test":"TestBroken/case","Elapsed":2.5}
{"Action":"output","Package":"m/b","Test":"TestBroken","Output":"--- FAIL: TestBroken (2.50s)\n"}
{"Action":"fail","Package":"m/b","Test":"TestBroken","Elapsed":2.5}
{"Action":"run","Package":"m/a","Test":"TestSlow"}
{"Action":"output","Package":"m/a","Test":"TestSlow","Output":"    a_test.go:3: a log line\n"}
{"Action":"pass","Package":"m/a","Test":"TestSlow","Elapsed":7}
{"Action":"output","Package":"m/a","Output":"PASS\n"}
{"Action":"output","Package":"m/a","Output":"ok  \tm/a\t7.2s\n"}
{"Action":"pass","Package":"m/a","Elapsed":7.2}
go: downloading example.com/dep v1.0.0
{"Action":"output","Package":"m/b","Output":"FAIL\tm/b\t2.6s\n"}
{"Action":"fail","Package":"m/b","Elapsed":2.6}
{"Action":"output","Package":"m/c","Output":"?   \tm/c\t[no test files]\n"}
{"Action":"skip","Package":"m/c","Elapsed":0}
`
	var out strings.Builder
	tests, packages, err := timings(strings.NewReader(events), &out)
	if err != nil {
		t.Fatal(err)
	}
	want := "ok  \tm/a\t7.2s\n" +
		"go: downloading example.com/dep v1.0.0\n" +
		"    b_test.go:9: want 1, got 2\n--- FAIL: TestBroken (2.50s)\nFAIL\tm/b\t2.6s\n" +
		"?   \tm/c\t[no test files]\n"
	if out.String() != want {
		t.Errorf("printed:\n%s\nwant:\n%s", out.String(), want)
	}
	var names []string
	for _, tt := range tests {
		names = append(names, fmt.Sprintf("%s %.1f", tt.name, tt.elapsed.Seconds()))
	}
	if got := strings.Join(names, ", "); got != "m/a TestSlow 7.0, m/b TestBroken 2.5, m/a TestQuick 0.1" {
		t.Errorf("tests by time: %s", got)
	}
	if len(packages) != 2 || packages[0].name != "m/a" || packages[1].name != "m/b" {
		t.Errorf("packages by time: %+v", packages)
	}
}

// TestHelpNamesTheCommand: -h names the command as a user runs it, not
// the temporary binary go run builds, and exits as help does.
func TestHelpNamesTheCommand(t *testing.T) {
	var out strings.Builder
	_, err := parseFlags([]string{"-h"}, &out)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("parseFlags(-h) = %v, want flag.ErrHelp", err)
	}
	if !strings.HasPrefix(out.String(), "Usage: go run ./tools/test [flags]\n") || !strings.Contains(out.String(), "-fuzztime duration") {
		t.Errorf("-h printed:\n%s", out.String())
	}
	if strings.Contains(out.String(), os.TempDir()) || strings.Contains(out.String(), os.Args[0]) {
		t.Errorf("-h names a temporary path:\n%s", out.String())
	}
}

// TestFuzzFuncsAreWhatGoTestFuzzes: the fuzz targets are read from the
// source as go test finds them: top-level functions named Fuzz... taking a
// *testing.F, whatever the package calls testing.
func TestFuzzFuncsAreWhatGoTestFuzzes(t *testing.T) {
	file := filepath.Join(t.TempDir(), "x_test.go")
	src := `package x

import tt "testing"

func FuzzOne(f *tt.F)          {}
func FuzzHelper(f *tt.F, n int) {}
func FuzzNotAFuzz(t *tt.T)      {}
func fuzzLower(f *tt.F)         {}
func (s) FuzzMethod(f *tt.F)    {}
func FuzzTwo(f *tt.F)          {}
`
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := fuzzFuncs(file)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"FuzzOne", "FuzzTwo"}; !slices.Equal(got, want) {
		t.Errorf("fuzz targets %q, want %q", got, want)
	}
}

// TestTestOrderNamesPackages: the packages started first exist: a package
// moved or renamed must be renamed here, or its suite starts last again.
func TestTestOrderNamesPackages(t *testing.T) {
	for _, pkg := range testOrder[:len(testOrder)-1] {
		if _, err := os.Stat(filepath.Join("..", "..", pkg)); err != nil {
			t.Errorf("testOrder names %s: %v", pkg, err)
		}
	}
	if testOrder[len(testOrder)-1] != "./..." {
		t.Errorf("testOrder ends with %s, not ./...: packages would go untested", testOrder[len(testOrder)-1])
	}
}
