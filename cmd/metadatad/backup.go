package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
	"github.com/metadatad/metadatad/internal/grpcclient"
	"github.com/metadatad/metadatad/server"
	"github.com/metadatad/metadatad/store/pebble"
	"github.com/metadatad/metadatad/store/pebble/backup"
)

// runBackup is `metadatad backup`: a backup of the embedded store, taken
// from a running server through AdminService.Backup, or from a data
// directory no server holds.
func runBackup(ctx context.Context, args []string, out io.Writer) error {
	fs := newFlagSet("metadatad backup")
	var f backupFlags
	f.register(fs)
	if _, err := parseFlags(fs, args, out); err != nil {
		return err
	}
	switch {
	case f.to == "":
		return usagef(fs, "-to is required")
	case (f.dataDir == "") == (f.client.Addr == ""):
		return usagef(fs, "give -server ADDR (a running metadatad) or -data-dir DIR (a stopped one), not both")
	case f.client.Addr == "" && (f.client.Secure() || f.client.SendsToken()):
		return usagef(fs, "the TLS and token flags go with -server")
	}
	start := time.Now()
	var m backup.Manifest
	var err error
	if f.client.Addr != "" {
		m, err = backupServer(ctx, f.client, f.to)
	} else {
		m, err = backupDataDir(ctx, f.dataDir, f.to)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "backup of %s written to %s: %d tables, %d files, %d bytes, in %s\n",
		m.Created.Format(time.RFC3339), f.to, len(m.Tables), len(m.Files), m.TotalBytes(), time.Since(start).Round(time.Millisecond))
	return nil
}

// backupFlags are the flags of `metadatad backup`.
type backupFlags struct {
	dataDir, to string
	client      grpcclient.Config
}

func (f *backupFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.dataDir, "data-dir", "", "back up the embedded store in this directory, which no running metadatad may hold (offline)")
	fs.StringVar(&f.client.Addr, "server", "", "back up the store of the metadatad serving at this address (online), e.g. localhost:50051; the token needs scope metadata.admin")
	f.client.RegisterFlags(fs)
	fs.StringVar(&f.to, "to", "", "directory to write the backup into: new or empty (required)")
}

// backupDataDir opens the store in dataDir, which fails while a server holds
// it, and writes a snapshot of it into to.
func backupDataDir(ctx context.Context, dataDir, to string) (backup.Manifest, error) {
	if _, err := os.Stat(dataDir); err != nil {
		return backup.Manifest{}, fmt.Errorf("backup: no store to back up: %w", err)
	}
	db, err := pebble.Open(pebble.Options{Dir: dataDir, Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if errors.Is(err, pebble.ErrUnfinished) {
		return backup.Manifest{}, fmt.Errorf("backup: %w", err)
	}
	if err != nil {
		return backup.Manifest{}, fmt.Errorf("backup: %w", notAlone(dataDir, err, "if a metadatad serves it, back it up with -server ADDR"))
	}
	defer db.Close()
	snap, err := backup.NewSource(db, dataDir, nil).Take(ctx)
	if err != nil {
		return backup.Manifest{}, err
	}
	defer snap.Remove()
	if err := snap.WriteTo(ctx, to); err != nil {
		return backup.Manifest{}, err
	}
	return snap.Manifest, nil
}

// backupServer receives a backup from the server at client.Addr and writes
// it into to, checking every file against the manifest.
func backupServer(ctx context.Context, client grpcclient.Config, to string) (backup.Manifest, error) {
	conn, err := client.Dial()
	if err != nil {
		return backup.Manifest{}, err
	}
	defer conn.Close()
	stream, err := metadatav1.NewAdminServiceClient(conn).Backup(ctx, &metadatav1.BackupRequest{})
	if err != nil {
		return backup.Manifest{}, fmt.Errorf("backup: %w", err)
	}
	first, err := stream.Recv()
	if err != nil {
		return backup.Manifest{}, fmt.Errorf("backup: %w", err)
	}
	if first.GetManifest() == nil {
		return backup.Manifest{}, errors.New("backup: the server's stream does not start with a manifest")
	}
	m := server.BackupManifestFromProto(first.GetManifest())
	w, err := backup.NewWriter(to, m, true)
	if err != nil {
		return backup.Manifest{}, err
	}
	if err := receiveFiles(stream, w); err != nil {
		return backup.Manifest{}, errors.Join(err, w.Abort())
	}
	return m, nil
}

// receiveFiles writes the chunks of the stream with w, then closes it.
func receiveFiles(stream interface {
	Recv() (*metadatav1.BackupResponse, error)
}, w *backup.Writer) error {
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return w.Close()
		}
		if err != nil {
			return fmt.Errorf("backup: %w", err)
		}
		c := resp.GetChunk()
		if c == nil {
			return errors.New("backup: the server sent a message without a chunk after the manifest")
		}
		if err := w.Write(c.GetFile(), c.GetOffset(), c.GetData()); err != nil {
			return err
		}
	}
}
