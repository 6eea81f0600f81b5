package backup_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/pebble"
	"github.com/metadatad/metadatad/store/pebble/backup"
)

var base = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// openStore opens the embedded store in dir, closed when the test ends
// unless the test closes it first with the returned function.
func openStore(t *testing.T, dir string) (*pebble.DB, func()) {
	t.Helper()
	db, err := pebble.Open(pebble.Options{Dir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("open %s: %v", dir, err)
	}
	closeDB := sync.OnceFunc(func() {
		if err := db.Close(); err != nil {
			t.Errorf("close %s: %v", dir, err)
		}
	})
	t.Cleanup(closeDB)
	return db, closeDB
}

func openRepo(t *testing.T, db store.Backend, kind images.Kind) *images.Repository {
	t.Helper()
	repo, err := images.Open(t.Context(), db, images.Options{Kind: kind})
	if err != nil {
		t.Fatal(err)
	}
	return repo
}

// requireImage fails unless img has its primary and its index row in repo.
func requireImage(t *testing.T, repo *images.Repository, img images.Image) {
	t.Helper()
	primary, index := repo.Tables()
	if _, err := primary.Get(t.Context(), img.CameraID, img.RowKey); err != nil {
		t.Fatalf("primary row of %s at %s: %v", img.CameraID, img.CapturedAt, err)
	}
	pk := images.IndexPartitionKey(img.CapturedAt, img.CameraID, 1)
	if _, err := index.Get(t.Context(), pk, images.IndexRowKey(img.RowKey, img.CameraID)); err != nil {
		t.Fatalf("index row of %s at %s: %v", img.CameraID, img.CapturedAt, err)
	}
}

// takeBackup writes a backup of db (in dataDir) into a new directory.
func takeBackup(t *testing.T, db *pebble.DB, dataDir string) string {
	t.Helper()
	snap, err := backup.NewSource(db, dataDir, nil).Take(t.Context())
	if err != nil {
		t.Fatalf("take: %v", err)
	}
	defer snap.Remove()
	dir := filepath.Join(t.TempDir(), "backup")
	if err := snap.WriteTo(t.Context(), dir); err != nil {
		t.Fatalf("write backup: %v", err)
	}
	return dir
}

// TestBackupHoldsEveryAcknowledgedCreate: 8 writers create images while a
// backup is taken; the restored store has every image whose create was
// acknowledged before the backup started, primary and index rows.
func TestBackupHoldsEveryAcknowledgedCreate(t *testing.T) {
	dataDir := t.TempDir()
	db, closeDB := openStore(t, dataDir)
	repo := openRepo(t, db, images.Single)
	source := backup.NewSource(db, dataDir, nil)

	var started atomic.Bool
	var mu sync.Mutex
	var before []images.Image
	var total atomic.Int64
	ctx, stop := context.WithCancel(t.Context())
	var writers sync.WaitGroup
	for w := range 8 {
		writers.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				img, err := repo.Create(ctx, images.Image{CameraID: fmt.Sprintf("cam-%d", w),
					CapturedAt: base.Add(time.Duration(i) * time.Minute), BlobURI: "blob://x"})
				if err != nil {
					if ctx.Err() == nil {
						t.Errorf("create: %v", err)
					}
					return
				}
				total.Add(1)
				// Acknowledged before the backup started if the flag was
				// still down once Create returned.
				if !started.Load() {
					mu.Lock()
					before = append(before, img)
					mu.Unlock()
				}
			}
		})
	}
	for total.Load() < 400 {
		time.Sleep(time.Millisecond)
	}
	started.Store(true)
	snap, err := source.Take(t.Context())
	during := total.Load()
	stop()
	writers.Wait()
	if err != nil {
		t.Fatalf("take: %v", err)
	}
	backupDir := filepath.Join(t.TempDir(), "backup")
	if err := snap.WriteTo(t.Context(), backupDir); err != nil {
		t.Fatalf("write backup: %v", err)
	}
	if err := snap.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "backup-scratch")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the snapshot's scratch directory is still there: %v", err)
	}
	closeDB()

	restored := t.TempDir() // exists and is empty, as a fresh volume would be
	m, err := backup.Restore(t.Context(), backupDir, restored)
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	if len(m.Tables) != 2 {
		t.Errorf("manifest tables %v, want the primary and index tables", m.Tables)
	}
	rdb, _ := openStore(t, restored)
	rrepo := openRepo(t, rdb, images.Single)
	for _, img := range before {
		requireImage(t, rrepo, img)
	}
	t.Logf("%d creates acknowledged before the backup, all restored; %d by the time Take returned, %d in all",
		len(before), during, total.Load())
}

// newBackup returns the directory of a backup of a small store.
func newBackup(t *testing.T) string {
	t.Helper()
	dataDir := t.TempDir()
	db, _ := openStore(t, dataDir)
	repo := openRepo(t, db, images.Single)
	for i := range 50 {
		if _, err := repo.Create(t.Context(), images.Image{CameraID: "cam-1", CapturedAt: base.Add(time.Duration(i) * time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	return takeBackup(t, db, dataDir)
}

// copyDir copies the regular files of from into a new directory.
func copyDir(t *testing.T, from string) string {
	t.Helper()
	to := filepath.Join(t.TempDir(), "copy")
	if err := os.CopyFS(to, os.DirFS(from)); err != nil {
		t.Fatal(err)
	}
	return to
}

// largestFile is the name of the largest data file of the backup in dir.
func largestFile(t *testing.T, dir string) string {
	t.Helper()
	m, err := backup.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	largest := m.Files[0]
	for _, f := range m.Files {
		if f.Size > largest.Size {
			largest = f
		}
	}
	return largest.Name
}

func editManifest(t *testing.T, dir string, edit func(m *backup.Manifest)) {
	t.Helper()
	m, err := backup.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	edit(m)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, backup.ManifestName), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestRestoreRefusesDamagedBackup: a backup changed after it was written is
// refused with a message naming what is wrong, and the target directory is
// left as it was found.
func TestRestoreRefusesDamagedBackup(t *testing.T) {
	good := newBackup(t)
	cases := []struct {
		name    string
		damage  func(t *testing.T, dir string) string // returns what the message must name
		wantErr error
		message string
	}{
		{"flipped byte", func(t *testing.T, dir string) string {
			name := largestFile(t, dir)
			path := filepath.Join(dir, name)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			b[len(b)/2] ^= 0x40
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
			return name
		}, backup.ErrDamaged, "SHA-256"},
		{"truncated file", func(t *testing.T, dir string) string {
			name := largestFile(t, dir)
			info, err := os.Stat(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(filepath.Join(dir, name), info.Size()/2); err != nil {
				t.Fatal(err)
			}
			return name
		}, backup.ErrDamaged, "truncated"},
		{"missing file", func(t *testing.T, dir string) string {
			name := largestFile(t, dir)
			if err := os.Remove(filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
			return name
		}, backup.ErrDamaged, "missing"},
		{"no manifest", func(t *testing.T, dir string) string {
			if err := os.Remove(filepath.Join(dir, backup.ManifestName)); err != nil {
				t.Fatal(err)
			}
			return backup.ManifestName
		}, backup.ErrDamaged, "not a backup"},
		{"unknown format version", func(t *testing.T, dir string) string {
			editManifest(t, dir, func(m *backup.Manifest) { m.FormatVersion = 2 })
			return "format version 2"
		}, backup.ErrFormat, "reads version 1"},
		{"file name outside the directory", func(t *testing.T, dir string) string {
			editManifest(t, dir, func(m *backup.Manifest) { m.Files[0].Name = "../escape" })
			return "../escape"
		}, backup.ErrDamaged, "file name"},
		{"tables the files do not hold", func(t *testing.T, dir string) string {
			editManifest(t, dir, func(m *backup.Manifest) { m.Tables = append(m.Tables, "videometadata") })
			return "videometadata"
		}, backup.ErrDamaged, "holds tables"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := copyDir(t, good)
			names := c.damage(t, dir)
			target := filepath.Join(t.TempDir(), "restored")
			_, err := backup.Restore(t.Context(), dir, target)
			if !errors.Is(err, c.wantErr) {
				t.Fatalf("restore: %v, want %v", err, c.wantErr)
			}
			for _, want := range []string{names, c.message} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("message %q does not say %q", err, want)
				}
			}
			if _, err := os.Stat(target); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a refused restore left %s behind: %v", target, err)
			}
		})
	}
}

// TestRestoreRefusesNonEmptyDirectory: restore writes nothing into a
// directory that holds anything, and says so.
func TestRestoreRefusesNonEmptyDirectory(t *testing.T) {
	from := newBackup(t)
	target := t.TempDir()
	if err := os.WriteFile(filepath.Join(target, "keep.txt"), []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := backup.Restore(t.Context(), from, target)
	if !errors.Is(err, backup.ErrNotEmpty) || !strings.Contains(err.Error(), target) {
		t.Fatalf("restore into a non-empty directory: %v, want ErrNotEmpty naming it", err)
	}
	entries, err := os.ReadDir(target)
	if err != nil || len(entries) != 1 || entries[0].Name() != "keep.txt" {
		t.Fatalf("the target now holds %v (%v), want only keep.txt", entries, err)
	}
}

// TestOneBackupAtATime: a second backup waits for nothing; it is refused
// until the first snapshot is removed.
func TestOneBackupAtATime(t *testing.T) {
	dataDir := t.TempDir()
	db, _ := openStore(t, dataDir)
	source := backup.NewSource(db, dataDir, nil)
	first, err := source.Take(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := source.Take(t.Context()); !errors.Is(err, backup.ErrBusy) {
		t.Fatalf("second take: %v, want ErrBusy", err)
	}
	if err := first.Remove(); err != nil {
		t.Fatal(err)
	}
	again, err := source.Take(t.Context())
	if err != nil {
		t.Fatalf("take after remove: %v", err)
	}
	if err := again.Remove(); err != nil {
		t.Fatal(err)
	}
}
