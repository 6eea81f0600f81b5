package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
	"github.com/metadatad/metadatad/internal/azurite"
)

// metadatadRun runs `metadatad args...` with the extra variables env and
// returns its exit status, stdout and stderr.
func metadatadRun(t *testing.T, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := command(ctx, args...)
	cmd.Env = append(cmd.Env, env...)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return code, out.String(), errOut.String()
}

// TestCommandLine: help and version exit 0 on stdout; an unknown word,
// flag, stray argument or variable exits 2 with one short message naming
// the closest match, never the whole usage, and before anything is
// created.
func TestCommandLine(t *testing.T) {
	t.Parallel() // independent: daemons, data directories and ports of its own
	dataDir := filepath.Join(t.TempDir(), "data")
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		code int
		// stdout and stderr hold what the output must have; not what it must not.
		stdout, stderr, not []string
	}{
		{name: "-h", args: []string{"-h"}, stdout: []string{"Commands:", "backup", "restore", "copy", "compact", "version", "-listen string", "$METADATAD_LISTEN", "$METADATAD_DATA_DIR"}},
		{name: "--help", args: []string{"--help"}, stdout: []string{"Commands:", "$METADATAD_LOG_LEVEL"}},
		{name: "help", args: []string{"help"}, stdout: []string{"Commands:", "-data-dir string"}},
		{name: "serve -h", args: []string{"serve", "-h"}, stdout: []string{"Commands:"}},
		{name: "help backup", args: []string{"help", "backup"}, stdout: []string{"Usage: metadatad backup", "-server string", "$METADATAD_BACKUP_TO", "$METADATAD_CLIENT_TLS_CA"}, not: []string{"Commands:"}},
		{name: "backup -h", args: []string{"backup", "-h"}, stdout: []string{"-to string"}},
		{name: "restore -h names the value of -from plainly", args: []string{"restore", "-h"}, stdout: []string{"-from string", "as metadatad backup wrote it"},
			not: []string{"-from metadatad backup"}},
		{name: "copy -h has no -store", args: []string{"copy", "-h"}, stdout: []string{"-from string", "with azure as -from or -to"}, not: []string{"-store"}},
		{name: "compact -h", args: []string{"compact", "-h"}, stdout: []string{"-data-dir string", "$METADATAD_DATA_DIR"}},
		{name: "version", args: []string{"version"}, stdout: []string{"metadatad ", "revision ", runtime.Version()}},
		{name: "-version", args: []string{"-version"}, stdout: []string{"metadatad ", runtime.Version()}},
		{name: "unknown word", args: []string{"foo", "-listen", "127.0.0.1:0", "-data-dir", dataDir}, code: 2,
			stderr: []string{`unknown command "foo"`, "Run 'metadatad -h' for usage."}},
		{name: "misspelt word", args: []string{"bakup", "-data-dir", dataDir}, code: 2, stderr: []string{`unknown command "bakup" (did you mean backup?)`}},
		{name: "unknown flag", args: []string{"-lisen", "127.0.0.1:0", "-data-dir", dataDir}, code: 2, stderr: []string{"unknown flag -lisen (did you mean -listen?)"}},
		{name: "unknown flag of a command", args: []string{"compact", "-data-dri", dataDir}, code: 2,
			stderr: []string{"metadatad compact: unknown flag -data-dri (did you mean -data-dir?)", "Run 'metadatad compact -h'"}},
		{name: "stray argument", args: []string{"-listen", "127.0.0.1:0", "-data-dir", dataDir, "extra"}, code: 2, stderr: []string{`unexpected argument "extra"`}},
		{name: "command after flags", args: []string{"-data-dir", dataDir, "compact"}, code: 2, stderr: []string{"a command comes first"}},
		{name: "stray argument of a command", args: []string{"compact", "-data-dir", dataDir, "now"}, code: 2, stderr: []string{`unexpected argument "now"`}},
		{name: "bad value", args: []string{"-listen", "127.0.0.1:0", "-data-dir", dataDir, "-log-format", "xml"}, code: 2, stderr: []string{"-log-format must be text or json"}},
		{name: "missing required flag", args: []string{"backup", "-data-dir", dataDir}, code: 2, stderr: []string{"-to is required"}},
		{name: "purge workers on the embedded store", args: []string{"-listen", "127.0.0.1:0", "-data-dir", dataDir, "-purge-workers", "2"}, code: 2,
			stderr: []string{"-purge-workers is for -store azure"}},
		{name: "purge workers by variable on the embedded store", env: []string{"METADATAD_PURGE_WORKERS=2"}, args: []string{"-listen", "127.0.0.1:0", "-data-dir", dataDir}, code: 2,
			stderr: []string{"-purge-workers is for -store azure"}},
		{name: "misspelt variable", env: []string{"METADATAD_DATA_DRI=" + dataDir}, args: []string{"-listen", "127.0.0.1:0"}, code: 2,
			stderr: []string{"$METADATAD_DATA_DRI names no flag", "$METADATAD_DATA_DIR, of -data-dir"}},
		{name: "misspelt variable, a command", env: []string{"METADATAD_FORM=x"}, args: []string{"restore", "-from", dataDir}, code: 2,
			stderr: []string{"$METADATAD_FORM names no flag", "$METADATAD_FROM"}},
		{name: "bad variable value", env: []string{"METADATAD_INDEX_SHARDS=many"}, args: []string{"-data-dir", dataDir}, code: 2, stderr: []string{"$METADATAD_INDEX_SHARDS"}},
		{name: "a command reads the variables", env: []string{"METADATAD_DATA_DIR=" + dataDir}, args: []string{"compact"}, code: 1,
			stderr: []string{"compact: stat " + dataDir}, not: []string{"-data-dir is required"}},
		{name: "a command leaves the daemon's variables", env: []string{"METADATAD_LISTEN=127.0.0.1:0"}, args: []string{"restore", "-from", dataDir}, code: 2,
			stderr: []string{"-from and -data-dir are required"}, not: []string{"METADATAD_LISTEN"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := metadatadRun(t, tc.env, tc.args...)
			if code != tc.code {
				t.Fatalf("exit status %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, stdout, stderr)
			}
			for _, want := range tc.stdout {
				if !strings.Contains(stdout, want) {
					t.Errorf("stdout has no %q:\n%s", want, stdout)
				}
			}
			for _, want := range tc.stderr {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr has no %q:\n%s", want, stderr)
				}
			}
			for _, not := range tc.not {
				if strings.Contains(stdout+stderr, not) {
					t.Errorf("output has %q:\n%s%s", not, stdout, stderr)
				}
			}
			if tc.code == 2 && (len(stderr) > 400 || strings.Contains(stderr, "-acquisition-instance-table")) {
				t.Errorf("a usage error prints the usage, %d bytes:\n%s", len(stderr), stderr)
			}
			if _, err := os.Stat(dataDir); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the data directory was created: %v", err)
			}
		})
	}
}

// TestHarnessVariableIsNoFlag: the variable naming the tests' emulator,
// which developers export, is not refused as a misspelt flag.
func TestHarnessVariableIsNoFlag(t *testing.T) {
	if !notFlags[azurite.EnvConnectionString] {
		t.Fatalf("%s is not among the variables that name no flag", azurite.EnvConnectionString)
	}
	code, _, stderr := metadatadRun(t, []string{azurite.EnvConnectionString + "=x"}, "version")
	if code != 0 {
		t.Fatalf("exit status %d with $%s set:\n%s", code, azurite.EnvConnectionString, stderr)
	}
}

// TestServeWord: `metadatad serve` serves with the flags after it.
func TestServeWord(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	d := startProcess(t, "serve", "-listen", "127.0.0.1:0", "-data-dir", dataDir)
	stop(t, d)
	if _, err := os.Stat(dataDir); err != nil {
		t.Fatalf("served not in -data-dir: %v", err)
	}
}

// TestAccessLog: by default the daemon logs the calls that fail and not
// those that succeed; -access-log all logs both.
func TestAccessLog(t *testing.T) {
	for _, tc := range []struct {
		name      string
		args      []string
		successes bool
	}{
		{"default", nil, false},
		{"all", []string{"-access-log", "all"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := startDaemon(t, t.TempDir(), tc.args...)
			client := d.client(t)
			if _, err := client.CreateSingleImageMetadata(t.Context(), &metadatav1.CreateSingleImageMetadataRequest{
				Metadata: &metadatav1.SingleImageMetadata{CameraId: "cam-1", CapturedAt: timestamppb.Now()}}); err != nil {
				t.Fatal(err)
			}
			_, err := client.GetLatestSingleImageMetadata(t.Context(), &metadatav1.GetLatestSingleImageMetadataRequest{CameraId: "nobody"})
			if status.Code(err) != codes.NotFound {
				t.Fatalf("latest of an unknown camera: %v, want NOT_FOUND", err)
			}
			var created bool
			deadline := time.After(10 * time.Second)
			for {
				select {
				case line := <-d.logs:
					created = created || strings.Contains(line, "grpc.method=CreateSingleImageMetadata")
					if !strings.Contains(line, "grpc.code=NotFound") {
						continue
					}
					// The create's line, when written, came first.
					if created != tc.successes {
						t.Errorf("the successful create logged: %v, want %v", created, tc.successes)
					}
					return
				case <-deadline:
					t.Fatal("no log line of the call that failed")
				}
			}
		})
	}
}

// TestJSONLogDurations: durations in JSON logs are strings, not nanoseconds.
func TestJSONLogDurations(t *testing.T) {
	var logs strings.Builder
	config{logFormat: "json"}.logger(&logs).Info("purge finished", "duration", 1500*time.Millisecond)
	if !strings.Contains(logs.String(), `"duration":"1.5s"`) {
		t.Errorf("JSON log %s, want the duration as 1.5s", logs.String())
	}
}

// TestEveryCommandsHelp: `metadatad NAME -h` and `metadatad help NAME`
// exit 0 for every command, print that command's usage and not the
// daemon's header, and state each flag's default once.
func TestEveryCommandsHelp(t *testing.T) {
	const daemonUsage = "Usage: metadatad [serve] [flags]" // serve's and help's own
	type helpCase struct {
		args  []string
		usage string
	}
	cases := []helpCase{{[]string{"-h"}, daemonUsage}, {[]string{"blobs", "audit", "-h"}, "Usage: metadatad blobs audit [flags]"}}
	for _, c := range commandList() {
		usage := "Usage: metadatad " + c.name + " "
		if c.name == "serve" || c.name == "help" {
			usage = daemonUsage
		}
		cases = append(cases, helpCase{[]string{c.name, "-h"}, usage}, helpCase{[]string{"help", c.name}, usage})
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out, errOut strings.Builder
			if code := exitCode(run(tc.args, &out), &errOut); code != 0 {
				t.Fatalf("exit %d, stderr %q", code, errOut.String())
			}
			help := out.String()
			if !strings.HasPrefix(help, tc.usage) {
				t.Errorf("help does not begin with %q:\n%s", tc.usage, help)
			}
			if tc.usage != daemonUsage && strings.Contains(help, "Commands:") {
				t.Errorf("help of one command prints the daemon's header:\n%s", help)
			}
			for _, flagHelp := range strings.Split(help, "\n  -")[1:] {
				if n := strings.Count(flagHelp, "(default "); n > 1 {
					t.Errorf("-%s states %d defaults", flagHelp, n)
				}
			}
		})
	}
}
