package server_test

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
	"github.com/metadatad/metadatad/server"
	"github.com/metadatad/metadatad/store/pebble"
	"github.com/metadatad/metadatad/store/pebble/backup"
)

// startBackupServer serves an embedded store on disk (backups are of its
// files) with backups on.
func startBackupServer(t *testing.T) (*harness, func() error) {
	t.Helper()
	dir := t.TempDir()
	db, closeDB := openPebble(t, pebble.Options{Dir: dir})
	return startServerOpts(t, db, serverOpts{runPurges: true, backups: backup.NewSource(db, dir, nil)}), closeDB
}

// TestBackupStreamsACopyOfTheStore: the Backup stream opens with a manifest
// whose total is the sum of its files, then carries every file whole; the
// files, checked against the manifest and restored, hold every row of
// every table at the same version.
func TestBackupStreamsACopyOfTheStore(t *testing.T) {
	h, closeDB := startBackupServer(t)
	seedMinutes(t, h, 5)
	before := h.snapshot(t)

	stream, err := metadatav1.NewAdminServiceClient(h.conn).Backup(t.Context(), &metadatav1.BackupRequest{})
	requireOK(t, err, "Backup")
	first, err := stream.Recv()
	requireOK(t, err, "first message")
	if first.GetManifest() == nil || first.GetChunk() != nil {
		t.Fatalf("first message %v, want the manifest alone", first)
	}
	m := server.BackupManifestFromProto(first.GetManifest())
	if m.FormatVersion != backup.FormatVersion || first.GetManifest().GetTotalBytes() != m.TotalBytes() || m.TotalBytes() == 0 {
		t.Fatalf("manifest: version %d, total %d for files of %d bytes", m.FormatVersion, first.GetManifest().GetTotalBytes(), m.TotalBytes())
	}
	if !strings.Contains(strings.Join(m.Tables, " "), "singleimagemetadataindex") {
		t.Errorf("manifest tables %v lack the single image index", m.Tables)
	}
	dir := filepath.Join(t.TempDir(), "backup")
	w, err := backup.NewWriter(dir, m, true)
	if err != nil {
		t.Fatal(err)
	}
	var received int64
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		requireOK(t, err, "chunk")
		c := resp.GetChunk()
		if resp.GetManifest() != nil || c == nil || len(c.GetData()) > 1<<20 {
			t.Fatalf("message after the manifest: %d bytes of chunk, manifest %v", len(c.GetData()), resp.GetManifest())
		}
		if err := w.Write(c.GetFile(), c.GetOffset(), c.GetData()); err != nil {
			t.Fatalf("chunk of %s at %d: %v", c.GetFile(), c.GetOffset(), err)
		}
		received += int64(len(c.GetData()))
	}
	if err := w.Close(); err != nil {
		t.Fatalf("the files streamed do not match the manifest: %v", err)
	}
	if received != m.TotalBytes() {
		t.Errorf("received %d bytes, the manifest says %d", received, m.TotalBytes())
	}
	h.shutdown(t, context.Background())
	requireOK(t, closeDB(), "close")

	restored := filepath.Join(t.TempDir(), "restored")
	if _, err := backup.Restore(t.Context(), dir, restored); err != nil {
		t.Fatalf("restore: %v", err)
	}
	db, _ := openPebble(t, pebble.Options{Dir: restored})
	startServer(t, db).requireUnchanged(t, before)
}

// TestBackupOneAtATime: while a snapshot of the store is held (a backup
// being sent), Backup is refused with FAILED_PRECONDITION; once it is
// removed, Backup works again.
func TestBackupOneAtATime(t *testing.T) {
	dir := t.TempDir()
	db, _ := openPebble(t, pebble.Options{Dir: dir})
	source := backup.NewSource(db, dir, nil)
	h := startServerOpts(t, db, serverOpts{runPurges: true, backups: source})
	admin := metadatav1.NewAdminServiceClient(h.conn)
	held, err := source.Take(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	stream, err := admin.Backup(t.Context(), &metadatav1.BackupRequest{})
	requireOK(t, err, "Backup")
	_, err = stream.Recv()
	requireCode(t, err, codes.FailedPrecondition)
	requireOK(t, held.Remove(), "remove")
	stream, err = admin.Backup(t.Context(), &metadatav1.BackupRequest{})
	requireOK(t, err, "Backup")
	for {
		_, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		requireOK(t, err, "backup after the first ended")
	}
}

// TestBackupWithoutFilesIsRefused: a server without a snapshot source (on
// Azure, whose data is no files of the server's) answers FAILED_PRECONDITION
// saying why.
func TestBackupWithoutFilesIsRefused(t *testing.T) {
	h := startServer(t, openMemPebble(t))
	stream, err := metadatav1.NewAdminServiceClient(h.conn).Backup(t.Context(), &metadatav1.BackupRequest{})
	requireOK(t, err, "Backup")
	_, err = stream.Recv()
	if st := requireCode(t, err, codes.FailedPrecondition); !strings.Contains(st.Message(), "Azure") {
		t.Errorf("message %q does not say why", st.Message())
	}
}
