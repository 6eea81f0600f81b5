package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/metadatad/metadatad/internal/azurite"
	"github.com/metadatad/metadatad/store/pebble/backup"
)

// TestStartRefusals: the daemon refuses, with exit status 1 and one
// message saying what to do, a data directory another server holds, a
// taken port (before the data directory is created) and a directory
// holding a backup (before the engine writes to it).
func TestStartRefusals(t *testing.T) {
	t.Run("held data directory", func(t *testing.T) {
		dataDir := t.TempDir()
		startDaemon(t, dataDir)
		code, _, stderr := metadatadRun(t, nil, "-listen", "127.0.0.1:0", "-data-dir", dataDir)
		want := []string{"cannot open the store in " + dataDir + " for itself alone", "another metadatad serves it", "another -data-dir"}
		if runtime.GOOS == "linux" {
			want = append(want, "holds it", "process ")
		}
		requireRefusal(t, code, stderr, want...)
	})
	t.Run("taken port", func(t *testing.T) {
		taken, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer taken.Close()
		dataDir := filepath.Join(t.TempDir(), "data")
		code, _, stderr := metadatadRun(t, nil, "-listen", taken.Addr().String(), "-data-dir", dataDir)
		requireRefusal(t, code, stderr, "-listen: ", "address already in use")
		if _, err := os.Stat(dataDir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the data directory was created before the port was found taken: %v", err)
		}
	})
	t.Run("a backup", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, backup.ManifestName), []byte("{}"), 0o600); err != nil {
			t.Fatal(err)
		}
		code, _, stderr := metadatadRun(t, nil, "-listen", "127.0.0.1:0", "-data-dir", dir)
		requireRefusal(t, code, stderr, "holds a backup", "metadatad restore -from "+dir+" -data-dir NEW_DIR")
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != 1 {
			t.Errorf("the backup directory holds %d entries, want its manifest alone: the engine wrote to it", len(entries))
		}
	})
}

func requireRefusal(t *testing.T, code int, stderr string, want ...string) {
	t.Helper()
	if code != 1 {
		t.Fatalf("exit status %d, want 1:\n%s", code, stderr)
	}
	for _, w := range want {
		if !strings.Contains(stderr, w) {
			t.Errorf("refusal has no %q:\n%s", w, stderr)
		}
	}
}

// TestConnectionStringEndpoints: a connection string naming one of the
// table and queue endpoints names both; one naming neither derives both.
func TestConnectionStringEndpoints(t *testing.T) {
	t.Setenv("AZURE_STORAGE_CONNECTION_STRING", "")
	key := "AccountName=" + azurite.Account + ";AccountKey=" + azurite.Key
	for _, tc := range []struct {
		name, connectionString, err string
	}{
		{"both", azurite.ConnectionString("http://127.0.0.1:10002", "http://127.0.0.1:10001"), ""},
		{"neither: derived from AccountName", "DefaultEndpointsProtocol=https;" + key + ";EndpointSuffix=core.windows.net", ""},
		{"no QueueEndpoint", key + ";TableEndpoint=http://127.0.0.1:10002/" + azurite.Account, "no QueueEndpoint"},
		{"no TableEndpoint", key + ";QueueEndpoint=http://127.0.0.1:10001/" + azurite.Account, "no TableEndpoint"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseConfig([]string{"-store", "azure", "-azure-connection-string", tc.connectionString}, nil)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("parseConfig: %v, want an error naming %q", err, tc.err)
			case err != nil && strings.Contains(err.Error(), azurite.Key):
				t.Fatalf("error %q repeats the account key", err)
			}
		})
	}
}

// TestAzureStartWaits: Azure Storage that does not answer is waited for
// within -azure-start-timeout, saying so while it waits, and named.
func TestAzureStartWaits(t *testing.T) {
	// A listener that accepts no call: requests wait for an answer.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	url := "http://" + silent.Addr().String()

	t.Run("logs while it waits", func(t *testing.T) {
		var logs bytes.Buffer
		log := slog.New(slog.NewTextHandler(&logs, nil))
		start := time.Now()
		err := waitForAzure(t.Context(), 300*time.Millisecond, 50*time.Millisecond, log, url, func(ctx context.Context) error {
			<-ctx.Done()
			return ctx.Err()
		})
		if err == nil || !strings.Contains(err.Error(), "did not answer within -azure-start-timeout 300ms") || !strings.Contains(err.Error(), url) {
			t.Fatalf("waitForAzure: %v, want the timeout named", err)
		}
		if waited := time.Since(start); waited > 5*time.Second {
			t.Errorf("waited %s past a 300ms timeout", waited)
		}
		if !strings.Contains(logs.String(), "connecting to Azure Storage") || !strings.Contains(logs.String(), "still waiting for Azure Storage") {
			t.Errorf("no log of the wait:\n%s", logs.String())
		}
	})
	t.Run("the daemon", func(t *testing.T) {
		connectionString := azurite.ConnectionString(url, url)
		start := time.Now()
		code, _, stderr := metadatadRun(t, []string{"AZURE_STORAGE_CONNECTION_STRING=" + connectionString},
			"-store", "azure", "-listen", "127.0.0.1:0", "-azure-start-timeout", "1s")
		requireRefusal(t, code, stderr, "connecting to Azure Storage", "did not answer within -azure-start-timeout 1s")
		if strings.Contains(stderr, azurite.Key) {
			t.Errorf("the output repeats the account key:\n%s", stderr)
		}
		if waited := time.Since(start); waited > 15*time.Second {
			t.Errorf("the start took %s with -azure-start-timeout 1s", waited)
		}
	})
}
