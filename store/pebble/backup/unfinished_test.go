package backup_test

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/pebble"
	"github.com/metadatad/metadatad/store/pebble/backup"
)

// cutShortRestore leaves in a new directory what a restore of from killed
// after its first file leaves, and returns it.
func cutShortRestore(t *testing.T, from string) string {
	t.Helper()
	target := filepath.Join(t.TempDir(), "restored")
	m, err := backup.ReadManifest(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := pebble.MarkUnfinished(target, pebble.Unfinished{Command: "restore", Args: []string{"metadatad", "restore", "-from", from, "-data-dir", target}}); err != nil {
		t.Fatal(err)
	}
	src, err := os.Open(filepath.Join(from, m.Files[0].Name))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.Create(filepath.Join(target, m.Files[0].Name))
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	if _, err := io.CopyN(dst, src, m.Files[0].Size/2); err != nil {
		t.Fatal(err)
	}
	return target
}

// TestRestoreMarksUntilDone: a restore cut short leaves a directory the
// store refuses, quoting the restore's command line; the restore run again
// clears it and finishes, and the marker is gone.
func TestRestoreMarksUntilDone(t *testing.T) {
	from := newBackup(t)
	target := cutShortRestore(t, from)
	_, err := pebble.Open(pebble.Options{Dir: target})
	want := "holds a restore that did not finish: run `metadatad restore -from " + from + " -data-dir " + target + "` again"
	if !errors.Is(err, pebble.ErrUnfinished) || !strings.Contains(err.Error(), want) {
		t.Fatalf("open a restore cut short: %v, want ErrUnfinished saying %q", err, want)
	}
	if _, err := backup.Restore(t.Context(), from, target); err != nil {
		t.Fatalf("restore again: %v", err)
	}
	if _, found, err := pebble.ReadUnfinished(target); found || err != nil {
		t.Fatalf("marker found %v (%v) after the restore", found, err)
	}
	db, _ := openStore(t, target)
	repo := openRepo(t, db, images.Single)
	for i := range 50 {
		at := base.Add(time.Duration(i) * time.Minute)
		requireImage(t, repo, images.Image{CameraID: "cam-1", CapturedAt: at, RowKey: store.InvertedTicksRowKey(at)})
	}
}

// TestRestoreOverUnfinished: what else a directory with a marker may hold
// decides whether a restore redoes it; a redo that fails leaves only the
// marker.
func TestRestoreOverUnfinished(t *testing.T) {
	from := newBackup(t)
	t.Run("a copy's is refused", func(t *testing.T) {
		target := t.TempDir()
		if err := pebble.MarkUnfinished(target, pebble.Unfinished{Command: "copy", Args: []string{"metadatad", "copy"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := backup.Restore(t.Context(), from, target); !errors.Is(err, backup.ErrNotEmpty) {
			t.Fatalf("restore over an unfinished copy: %v, want ErrNotEmpty", err)
		}
		if _, found, _ := pebble.ReadUnfinished(target); !found {
			t.Error("the copy's marker is gone")
		}
	})
	t.Run("an unreadable marker alone is redone", func(t *testing.T) {
		target := t.TempDir()
		if err := os.WriteFile(filepath.Join(target, pebble.UnfinishedName), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := backup.Restore(t.Context(), from, target); err != nil {
			t.Fatalf("restore over a marker cut short: %v", err)
		}
	})
	t.Run("an unreadable marker with files is refused", func(t *testing.T) {
		target := cutShortRestore(t, from)
		if err := os.WriteFile(filepath.Join(target, pebble.UnfinishedName), []byte("{"), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := backup.Restore(t.Context(), from, target); !errors.Is(err, backup.ErrNotEmpty) {
			t.Fatalf("restore: %v, want ErrNotEmpty", err)
		}
	})
	t.Run("a failed redo leaves the marker", func(t *testing.T) {
		target := cutShortRestore(t, from)
		damaged := copyDir(t, from)
		if err := os.Truncate(filepath.Join(damaged, largestFile(t, damaged)), 10); err != nil {
			t.Fatal(err)
		}
		if _, err := backup.Restore(t.Context(), damaged, target); !errors.Is(err, backup.ErrDamaged) {
			t.Fatalf("restore of a damaged backup: %v, want ErrDamaged", err)
		}
		entries, err := os.ReadDir(target)
		if err != nil || len(entries) != 1 || entries[0].Name() != pebble.UnfinishedName {
			t.Fatalf("the target holds %v (%v), want only the marker", entries, err)
		}
		if _, err := pebble.Open(pebble.Options{Dir: target}); !errors.Is(err, pebble.ErrUnfinished) {
			t.Fatalf("open: %v, want ErrUnfinished", err)
		}
	})
}

// TestRemoveStaleScratch: the scratch directory a process killed during a
// backup left is removed, files and all; without one nothing happens.
func TestRemoveStaleScratch(t *testing.T) {
	dataDir := t.TempDir()
	if removed, err := backup.RemoveStaleScratch(dataDir); removed || err != nil {
		t.Fatalf("no scratch: removed %v, %v", removed, err)
	}
	checkpoint := filepath.Join(dataDir, "backup-scratch", "checkpoint")
	if err := os.MkdirAll(checkpoint, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(checkpoint, "000005.sst"), []byte("linked"), 0o600); err != nil {
		t.Fatal(err)
	}
	if removed, err := backup.RemoveStaleScratch(dataDir); !removed || err != nil {
		t.Fatalf("stale scratch: removed %v, %v", removed, err)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "backup-scratch")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("scratch still there: %v", err)
	}
}
