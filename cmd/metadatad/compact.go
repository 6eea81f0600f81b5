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

	"github.com/metadatad/metadatad/store/pebble"
)

// runCompact is `metadatad compact`: the embedded store of a stopped
// server rewritten whole, so that the space of rows a purge deleted goes
// back to the filesystem at once rather than as the engine's own
// compactions get to it.
func runCompact(ctx context.Context, args []string, out io.Writer) error {
	fs := newFlagSet("metadatad compact")
	var f compactFlags
	f.register(fs)
	if _, err := parseFlags(fs, args, out); err != nil {
		return err
	}
	if f.dataDir == "" {
		return usagef(fs, "-data-dir is required")
	}
	// Opening a missing directory would create an empty store there.
	if _, err := os.Stat(f.dataDir); err != nil {
		return fmt.Errorf("compact: %w", err)
	}
	db, err := pebble.Open(pebble.Options{Dir: f.dataDir, Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if errors.Is(err, pebble.ErrUnfinished) {
		return fmt.Errorf("compact: %w", err)
	}
	if err != nil {
		return fmt.Errorf("compact: %w", notAlone(f.dataDir, err, "stop the metadatad that serves it first"))
	}
	start, before := time.Now(), db.DataBytes()
	if err := db.Compact(ctx); err != nil {
		return errors.Join(fmt.Errorf("compact: %w", err), db.Close())
	}
	after := db.DataBytes()
	if err := db.Close(); err != nil {
		return fmt.Errorf("compact: %w", err)
	}
	fmt.Fprintf(out, "compacted %s: data %d bytes before, %d after, in %s\n", f.dataDir, before, after, time.Since(start).Round(time.Millisecond))
	return nil
}

// compactFlags are the flags of `metadatad compact`.
type compactFlags struct{ dataDir string }

func (f *compactFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.dataDir, "data-dir", "", "data directory of a stopped metadatad (required)")
}
