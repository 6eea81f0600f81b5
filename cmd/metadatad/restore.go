package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/pebble"
	"github.com/metadatad/metadatad/store/pebble/backup"
	"github.com/metadatad/metadatad/store/retention"
	"github.com/metadatad/metadatad/store/retention/embedded"
)

// runRestore is `metadatad restore`: a backup, checked file by file, copied
// into a new data directory, its outbox of deleted images marked restored,
// then the purges it holds unfinished named.
func runRestore(ctx context.Context, args []string, out io.Writer) error {
	fs := newFlagSet("metadatad restore")
	var f restoreFlags
	f.register(fs)
	if _, err := parseFlags(fs, args, out); err != nil {
		return err
	}
	if f.from == "" || f.dataDir == "" {
		return usagef(fs, "-from and -data-dir are required")
	}
	start := time.Now()
	m, err := backup.Restore(ctx, f.from, f.dataDir)
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	fmt.Fprintf(out, "restored the backup of %s into %s: %d tables, %d files, %d bytes, every file checked, in %s\n",
		m.Created.Format(time.RFC3339), f.dataDir, len(m.Tables), len(m.Files), m.TotalBytes(), time.Since(start).Round(time.Millisecond))
	jobs, err := settleRestored(ctx, f.dataDir)
	if err != nil {
		return fmt.Errorf("restore: the store is restored, but marking its outbox of deleted images or listing its purges failed: %w", err)
	}
	for _, j := range jobs {
		what := "resumes where it stopped when metadatad starts on this directory"
		if j.Unconfirmed {
			what = "had not been confirmed: it ends failed at the next start, having deleted nothing"
		}
		fmt.Fprintf(out, "purge %s (%s, cutoff %s) %s\n", j.ID, j.State, j.Cutoff.Format(time.RFC3339), what)
	}
	return nil
}

// restoreFlags are the flags of `metadatad restore`.
type restoreFlags struct{ from, dataDir string }

func (f *restoreFlags) register(fs *flag.FlagSet) {
	// No back quotes around `metadatad backup`: the flag package would
	// take the words for the name of the value.
	fs.StringVar(&f.from, "from", "", "directory of the backup, as metadatad backup wrote it (required)")
	fs.StringVar(&f.dataDir, "data-dir", "", "data directory to restore into: new or empty (required)")
}

// settleRestored marks the outbox of deleted images of the store in
// dataDir restored (retention's MarkOutboxRestored), so that a position
// its readers got after the backup is refused rather than read on from,
// past new deletions; and it lists the purge jobs that had not ended at
// the backup's instant.
func settleRestored(ctx context.Context, dataDir string) (_ []*retention.Job, err error) {
	db, err := pebble.Open(pebble.Options{Dir: dataDir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, db.Close()) }()
	repo, err := images.Open(ctx, db, images.Options{Kind: images.Single})
	if err != nil {
		return nil, err
	}
	engine, err := retention.Open(ctx, retention.Options{Backend: db, Repositories: []*images.Repository{repo}, Outbox: true, Driver: embedded.New})
	if err != nil {
		return nil, err
	}
	if err := engine.MarkOutboxRestored(ctx); err != nil {
		return nil, err
	}
	var unfinished []*retention.Job
	var cursor *store.Cursor
	for {
		page, next, err := engine.List(ctx, 100, cursor)
		if err != nil {
			return nil, err
		}
		for _, j := range page {
			if !j.State.Terminal() {
				unfinished = append(unfinished, j)
			}
		}
		if next == nil {
			return unfinished, nil
		}
		cursor = next
	}
}
