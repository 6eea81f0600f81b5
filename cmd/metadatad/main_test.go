package main

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
	"github.com/metadatad/metadatad/internal/azurite"
)

// The test binary doubles as the daemon: started with this variable set it
// runs main's run() instead of the tests, so the tests can kill a real
// process without building a binary first. Its name is no METADATAD_
// variable, which the daemon would refuse as naming no flag.
const daemonEnv = "TEST_RUN_METADATAD"

func TestMain(m *testing.M) {
	if os.Getenv(daemonEnv) == "1" {
		os.Exit(exitCode(run(os.Args[1:], os.Stdout), os.Stderr))
	}
	os.Exit(azurite.Main(m))
}

// daemonEnviron is the environment of a metadatad the tests start.
func daemonEnviron() []string { return append(os.Environ(), daemonEnv+"=1") }

// daemon is a metadatad process started by a test.
type daemon struct {
	cmd  *exec.Cmd
	addr string
	// metricsAddr is where /metrics is served, with -metrics-listen.
	metricsAddr string
	logs        chan string
	// startup holds the lines logged before the daemon was serving.
	startup []string
}

var (
	servingLine        = regexp.MustCompile(`msg=serving addr=(\S+)`)
	servingMetricsLine = regexp.MustCompile(`msg="serving metrics" addr=(\S+)`)
)

func startDaemon(t *testing.T, dataDir string, args ...string) *daemon {
	t.Helper()
	return startProcess(t, append([]string{"-listen", "127.0.0.1:0", "-data-dir", dataDir}, args...)...)
}

// startProcess starts `metadatad args...` and waits for it to serve.
func startProcess(t *testing.T, args ...string) *daemon {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = daemonEnviron()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := &daemon{cmd: cmd, logs: make(chan string, 1024)}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	go func() {
		defer close(d.logs)
		scanner := bufio.NewScanner(stderr)
		for scanner.Scan() {
			select {
			case d.logs <- scanner.Text():
			default:
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	deadline := time.After(30 * time.Second)
	for d.addr == "" {
		select {
		case line, ok := <-d.logs:
			if !ok {
				t.Fatalf("daemon exited before serving: %q", d.startup)
			}
			d.startup = append(d.startup, line)
			if m := servingLine.FindStringSubmatch(line); m != nil {
				d.addr = m[1]
			}
			if m := servingMetricsLine.FindStringSubmatch(line); m != nil {
				d.metricsAddr = m[1]
			}
		case <-deadline:
			t.Fatal("daemon not serving after 30s")
		}
	}
	return d
}

func (d *daemon) conn(t *testing.T) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(d.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func (d *daemon) client(t *testing.T) metadatav1.SingleImageMetadataServiceClient {
	t.Helper()
	return metadatav1.NewSingleImageMetadataServiceClient(d.conn(t))
}

// stop sends SIGTERM and waits for the daemon to log a clean stop and exit 0.
func stop(t *testing.T, d *daemon) {
	t.Helper()
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var stopped bool
	for !stopped {
		select {
		case line, ok := <-d.logs:
			if !ok {
				t.Fatal("daemon exited without logging a clean stop")
			}
			stopped = strings.Contains(line, "msg=stopped")
		case <-ctx.Done():
			t.Fatal("no clean stop 30s after SIGTERM")
		}
	}
	// What the daemon printed after its stop line (a race report, a panic)
	// says why an exit was not clean.
	var after []string
	for line := range d.logs {
		after = append(after, line)
	}
	if err := d.cmd.Wait(); err != nil {
		t.Fatalf("daemon exit after SIGTERM: %v; after its stop it printed:\n%s", err, strings.Join(after, "\n"))
	}
}
