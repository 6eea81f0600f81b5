package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/pebble"
	"github.com/metadatad/metadatad/store/pebble/backup"
	"github.com/metadatad/metadatad/store/tablecopy"
)

var unfinishedKills = flag.Int("unfinished-kills", 5, "kill -9 points of each of TestRestoreKilledIsRefusedUntilRerun and TestCopyKilledIsRefusedUntilRerun")

// seededTables are the tables seedStore fills: two a copy copies.
var seededTables = []string{images.IndexTable(images.Single.DefaultTable()), images.Single.DefaultTable()}

// seedStore writes rows of about 1 KiB into seededTables of a new store in
// dir through the store's Go API (much faster than over gRPC), so that a
// restore or copy of it takes long enough to be killed half way.
func seedStore(t *testing.T, dir string, rows int) {
	t.Helper()
	db, err := pebble.Open(pebble.Options{Dir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	pool := make([]byte, 1<<16)
	for i := range pool {
		pool[i] = 'a' + byte(rand.IntN(26))
	}
	for _, name := range seededTables {
		tbl, err := db.Table(t.Context(), name)
		if err != nil {
			t.Fatal(err)
		}
		for p := 0; p < rows; p += store.MaxBatchOps {
			ops := make([]store.Op, 0, store.MaxBatchOps)
			for r := p; r < min(p+store.MaxBatchOps, rows); r++ {
				at := rand.IntN(len(pool) - 1024)
				ops = append(ops, store.Op{Kind: store.OpUpsert, Mode: store.Replace, Entity: store.Entity{
					PartitionKey: fmt.Sprintf("p%05d", p), RowKey: fmt.Sprintf("r%06d", r), Properties: store.Properties{"Blob": string(pool[at : at+1024]), "N": int64(r)}}})
			}
			if err := tbl.Batch(t.Context(), ops); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// requireSameRows fails unless the stores in the two directories hold the
// same rows in seededTables.
func requireSameRows(t *testing.T, wantDir, gotDir string, rows int) {
	t.Helper()
	want, got := openQuiet(t, wantDir), openQuiet(t, gotDir)
	for _, name := range seededTables {
		w, g := scanAll(t, want, name), scanAll(t, got, name)
		if len(w) != rows || !slices.EqualFunc(w, g, func(a, b store.Entity) bool {
			return a.PartitionKey == b.PartitionKey && a.RowKey == b.RowKey && store.EqualProperties(a.Properties, b.Properties)
		}) {
			t.Fatalf("table %s: %d rows, want the %d of the source (%d seeded), equal", name, len(g), len(w), rows)
		}
	}
}

// command runs `metadatad args...` as a child process.
func command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = daemonEnviron()
	return cmd
}

// killWhen runs `metadatad args...` and kills it with SIGKILL once
// cut holds, polled every 200µs; killed is false when the command ended
// by itself first.
func killWhen(t *testing.T, cut func() bool, args ...string) (killed bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := command(ctx, args...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("%v: %v\n%s", args, err, out.String())
			}
			return false
		case <-time.After(200 * time.Microsecond):
		}
		if cut() {
			_ = cmd.Process.Signal(syscall.SIGKILL)
			err := <-done
			var exit *exec.ExitError
			return errors.As(err, &exit) && !exit.Success()
		}
	}
}

// dirBytes is the size of the regular files under dir, the log directory
// included; files that come and go while it looks are skipped.
func dirBytes(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, e fs.DirEntry, err error) error {
		if err == nil && e.Type().IsRegular() {
			if info, err := e.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

func marked(dir string) bool { return !markTime(dir).IsZero() }

// markTime is when the unfinished marker of dir was written; zero for none.
func markTime(dir string) time.Time {
	info, err := os.Stat(filepath.Join(dir, pebble.UnfinishedName))
	if err != nil {
		return time.Time{}
	}
	return info.ModTime()
}

// markedAgain returns a test of whether dir's marker has been written
// since the call: the rerun's own, not the one a kill left.
func markedAgain(dir string) func() bool {
	before := markTime(dir)
	return func() bool { return markTime(dir).After(before) }
}

// snapshotDir lists dir's entries with their sizes and times.
func snapshotDir(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprint(e.Name(), " ", info.Size(), " ", info.ModTime().UnixNano()))
	}
	return out
}

// requireRefusedUnfinished starts the daemon on dataDir and requires it to
// refuse with exit status 1, saying want, without serving and without
// changing a file of the directory; with all, compact and an offline
// backup must refuse it too.
func requireRefusedUnfinished(t *testing.T, dataDir, want string, all bool) {
	t.Helper()
	before := snapshotDir(t, dataDir)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	runs := [][]string{{"-listen", "127.0.0.1:0", "-data-dir", dataDir}}
	if all {
		runs = append(runs, []string{"compact", "-data-dir", dataDir},
			[]string{"backup", "-data-dir", dataDir, "-to", filepath.Join(t.TempDir(), "backup")})
	}
	for _, args := range runs {
		out, err := command(ctx, args...).CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 {
			t.Fatalf("%v on an unfinished directory: %v, want exit status 1\n%s", args, err, out)
		}
		if text := string(out); !strings.Contains(text, want) || strings.Contains(text, "msg=serving") {
			t.Fatalf("%v on an unfinished directory says\n%s\nwant %q and no serving", args, text, want)
		}
	}
	if after := snapshotDir(t, dataDir); !slices.Equal(before, after) {
		t.Fatalf("refusing the directory changed it:\nbefore %v\nafter  %v", before, after)
	}
}

// killedUntilRerun kills `metadatad args...` -unfinished-kills times at
// random points, each chosen by cutAt for the attempt (with hi, halved
// after each attempt that ended before its point, to draw from), and
// requires each time that the daemon refuses target saying want. A run that
// ended first leaves a finished target, which reset clears. The last event
// is a kill; the caller then runs the command to its end.
func killedUntilRerun(t *testing.T, target, want string, reset func(), cutAt func(hi float64) func() bool, args ...string) {
	t.Helper()
	hi, kills := 1.0, 0
	for attempt := 0; kills < *unfinishedKills; attempt++ {
		if attempt == 8*(*unfinishedKills) {
			t.Fatalf("%d kills in %d attempts: the command ends before the points drawn", kills, attempt)
		}
		// Killed after its marker was removed, the command had finished.
		if !killWhen(t, cutAt(hi), args...) || !marked(target) {
			hi /= 2
			reset()
			continue
		}
		kills++
		t.Logf("kill %d (attempt %d): %d bytes in %s", kills, attempt+1, dirBytes(target), target)
		requireRefusedUnfinished(t, target, want, kills == 1)
	}
}

// TestRestoreKilledIsRefusedUntilRerun kills `metadatad restore` at random
// points of its copy: the daemon (and compact and backup) refuse the
// directory naming the restore to rerun, without writing to it, and the
// restore run again completes with every row.
func TestRestoreKilledIsRefusedUntilRerun(t *testing.T) {
	const rows = 5_000
	source := t.TempDir()
	seedStore(t, source, rows)
	from := filepath.Join(t.TempDir(), "backup")
	if err := runBackup(t.Context(), []string{"-data-dir", source, "-to", from}, io.Discard); err != nil {
		t.Fatal(err)
	}
	m, err := backup.ReadManifest(from)
	if err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(t.TempDir(), "restored")
	args := []string{"restore", "-from", from, "-data-dir", target}
	want := "the data directory " + target + " holds a restore that did not finish: run `metadatad restore -from " + from + " -data-dir " + target + "` again"
	killedUntilRerun(t, target, want, func() {
		if err := os.RemoveAll(target); err != nil {
			t.Fatal(err)
		}
	}, func(hi float64) func() bool {
		// A point in the bytes copied, from just after this run's marker to
		// the checks after the last file.
		at := int64(rand.Float64() * hi * float64(m.TotalBytes()))
		started := markedAgain(target)
		return func() bool { return started() && dirBytes(target) >= at }
	}, args...)

	if out, err := command(t.Context(), args...).CombinedOutput(); err != nil {
		t.Fatalf("restore again: %v\n%s", err, out)
	}
	if marked(target) {
		t.Fatal("the restore ended and left its marker")
	}
	requireSameRows(t, source, target, rows)
}

// TestCopyKilledIsRefusedUntilRerun kills `metadatad copy -to embedded:` at
// random points of its copy: the daemon (and compact and backup) refuse the target
// naming the copy to rerun, without writing to it, and the copy run again
// resumes and ends with every row.
func TestCopyKilledIsRefusedUntilRerun(t *testing.T) {
	const rows = 5_000
	source := t.TempDir()
	seedStore(t, source, rows)
	sourceBytes := dirBytes(source)
	target := filepath.Join(t.TempDir(), "copied")
	args := []string{"copy", "-from", "embedded:" + source, "-to", "embedded:" + target}
	want := "the data directory " + target + " holds a copy that did not finish: run `metadatad copy -from embedded:" + source + " -to embedded:" + target + "` again"
	killedUntilRerun(t, target, want, func() {
		if err := os.RemoveAll(target); err != nil {
			t.Fatal(err)
		}
	}, func(hi float64) func() bool {
		// A point in the bytes still to copy, drawn once this run has
		// marked the target: the copy's log grows with the rows it writes.
		started, draw := markedAgain(target), rand.Float64()*hi
		at := int64(-1)
		return func() bool {
			if at < 0 && started() {
				base := dirBytes(target)
				at = base + int64(draw*float64(max(sourceBytes-base, 0)))
			}
			return at >= 0 && dirBytes(target) >= at
		}
	}, args...)

	// The copy records its position after each page of rows: one killed
	// before its first record has nothing to resume from.
	recorded := copyPositionRecorded(t, target)
	out, err := command(t.Context(), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("copy again: %v\n%s", err, out)
	}
	if recorded && !strings.Contains(string(out), "resumed") && !strings.Contains(string(out), "already copied") {
		t.Errorf("the copy run again started over, though the killed one had recorded its position:\n%s", out)
	}
	if marked(target) {
		t.Fatal("the copy ended and left its marker")
	}
	requireSameRows(t, source, target, rows)
}

// copyPositionRecorded reports whether the unfinished copy in dir recorded
// its position in the progress table.
func copyPositionRecorded(t *testing.T, dir string) bool {
	t.Helper()
	db, err := pebble.Open(pebble.Options{Dir: dir, AllowUnfinished: copyCommand, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	return len(scanAll(t, db, tablecopy.ProgressTable)) > 0
}

// TestBackupScratchOfKilledServerRemoved kills the daemon while it streams
// a backup, which leaves DATA_DIR/backup-scratch; the next start removes it
// before serving, and says so.
func TestBackupScratchOfKilledServerRemoved(t *testing.T) {
	dataDir := t.TempDir()
	// 24 MB: more than the stream's flow-control window can grow to (16
	// MiB), so the server is still sending when it is killed.
	seedStore(t, dataDir, 12_000)
	d := startDaemon(t, dataDir)
	stream, err := metadatav1.NewAdminServiceClient(d.conn(t)).Backup(t.Context(), &metadatav1.BackupRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if first, err := stream.Recv(); err != nil || first.GetManifest() == nil {
		t.Fatalf("first message %v, %v; want the manifest", first, err)
	}
	if err := d.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = d.cmd.Wait()
	scratch := filepath.Join(dataDir, "backup-scratch")
	if entries, err := os.ReadDir(filepath.Join(scratch, "checkpoint")); err != nil || len(entries) == 0 {
		t.Fatalf("the killed server left no scratch checkpoint (%v, %d files): the backup ended before the kill", err, len(entries))
	}
	d = startDaemon(t, dataDir)
	if !slices.ContainsFunc(d.startup, func(line string) bool { return strings.Contains(line, "removed the scratch directory") }) {
		t.Errorf("the start logged no removal of the scratch:\n%s", strings.Join(d.startup, "\n"))
	}
	if _, err := os.Stat(scratch); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s is still there once serving: %v", scratch, err)
	}
	stop(t, d)
}
