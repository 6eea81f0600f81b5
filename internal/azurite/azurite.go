package azurite

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sync"
	"testing"
	"time"
)

// EnvConnectionString names an emulator already running; EnvBlobConnectionString
// its blob service.
const (
	EnvConnectionString     = "METADATAD_AZURITE_CONNECTION_STRING"
	EnvBlobConnectionString = "METADATAD_AZURITE_BLOB_CONNECTION_STRING"
)

// Azurite's well-known development account.
const (
	Account = "devstoreaccount1"
	Key     = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)

var (
	once    sync.Once
	started *child
	connStr string
	blobStr string
	why     string
)

// RequireBlob is Require for the emulator's blob service: a connection
// string naming its blob endpoint alone.
func RequireBlob(t testing.TB) string {
	t.Helper()
	Require(t)
	if s := os.Getenv(EnvBlobConnectionString); s != "" {
		return s
	}
	if blobStr == "" {
		t.Fatalf("the Azurite at %s names no blob service: set %s too", os.Getenv(EnvConnectionString), EnvBlobConnectionString)
	}
	return blobStr
}

// Require returns a connection string of a running emulator, or skips (fails
// under CI=true) the test when there is none.
func Require(t testing.TB) string {
	t.Helper()
	once.Do(start)
	if connStr == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("Azurite is required under CI=true: %s", why)
		}
		t.Skipf("Azure suites need Azurite: %s. Run `npm ci --prefix tools/azurite` once, or set %s", why, EnvConnectionString)
	}
	return connStr
}

// Main runs a package's tests and stops the emulator this process started.
func Main(m *testing.M) int {
	code := m.Run()
	if started != nil {
		started.stop()
	}
	return code
}

// ConnectionString is the connection string of an emulator's endpoints.
func ConnectionString(tableURL, queueURL string) string {
	return fmt.Sprintf("DefaultEndpointsProtocol=http;AccountName=%s;AccountKey=%s;TableEndpoint=%s/%s;QueueEndpoint=%s/%s;",
		Account, Key, tableURL, Account, queueURL, Account)
}

// startTimeout bounds Azurite's start. Node loads some 450 packages first:
// about a second on an idle machine, but over a minute on 2 cores busy with
// compiling and racing test binaries (seen at a load average of 30).
const startTimeout = 3 * time.Minute

var listening = regexp.MustCompile(`Azurite (Blob|Table|Queue) service is successfully listening at (http://\S+)`)

func start() {
	if s := os.Getenv(EnvConnectionString); s != "" {
		connStr = s
		return
	}
	bin := binPath()
	if _, err := os.Stat(bin); err != nil {
		why = "tools/azurite/node_modules is not installed"
		return
	}
	cmd := exec.Command(bin, "--inMemoryPersistence", "--loose", "--skipApiVersionCheck", "--disableProductStyleUrl",
		"--blobHost", "127.0.0.1", "--blobPort", "0",
		"--queueHost", "127.0.0.1", "--queuePort", "0",
		"--tableHost", "127.0.0.1", "--tablePort", "0")
	// A pipe of our own rather than StdoutPipe: Wait runs on the launching
	// goroutine while this one still reads.
	out, w, err := os.Pipe()
	if err != nil {
		why = err.Error()
		return
	}
	cmd.Stdout = w
	c, err := launch(cmd)
	if err != nil {
		w.Close()
		out.Close()
		why = "starting azurite: " + err.Error()
		return
	}
	w.Close()
	urls := map[string]string{}
	found, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited) // its output ended: it exited, or will print no more
		defer out.Close()
		scanner := bufio.NewScanner(out)
		for scanner.Scan() {
			if m := listening.FindStringSubmatch(scanner.Text()); m != nil {
				urls[m[1]] = m[2]
				if len(urls) == 3 {
					close(found)
				}
			}
		}
	}()
	select {
	case <-found:
		started = c
		connStr = ConnectionString(urls["Table"], urls["Queue"])
		blobStr = fmt.Sprintf("DefaultEndpointsProtocol=http;AccountName=%s;AccountKey=%s;BlobEndpoint=%s/%s;", Account, Key, urls["Blob"], Account)
		os.Setenv(EnvBlobConnectionString, blobStr)
		// Child processes (a test run again in a process of its own, a
		// daemon under test) use this emulator rather than start their own:
		// Node's start costs seconds on a busy machine.
		os.Setenv(EnvConnectionString, connStr)
	case <-exited:
		<-c.exited
		why = "azurite exited before it was listening"
	case <-time.After(startTimeout):
		c.stop()
		why = fmt.Sprintf("azurite did not start listening within %v", startTimeout)
	}
}

// binPath is the emulator `npm ci --prefix tools/azurite` installs.
func binPath() string {
	return filepath.Join(moduleRoot(), "tools", "azurite", "node_modules", ".bin", "azurite")
}

// moduleRoot is the repository root, two folders above this file.
func moduleRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}
