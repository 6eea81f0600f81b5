package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"

	"github.com/metadatad/metadatad/internal/diskspace"
	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/azqueue"
	"github.com/metadatad/metadatad/store/aztable"
	"github.com/metadatad/metadatad/store/backup"
	"github.com/metadatad/metadatad/store/pebble"
	"github.com/metadatad/metadatad/store/retention"
)

// backend is the store the daemon runs on: its tables, the queue purge
// tasks go through (nil for the table queue in the store itself), and what
// to call when the daemon stops.
type backend struct {
	tables store.Backend
	queue  retention.Queue
	close  func() error
	// writeCheck reports whether writes are accepted (free space, flushes
	// that succeed); nil when the backend has no such limit.
	writeCheck func() error
	// embedded is the embedded store, whose health metrics watch; nil on Azure.
	embedded *pebble.DB
	// azure is the Azure table backend, whose clock fallbacks metrics
	// watch; nil on the embedded store.
	azure *aztable.Backend
	// describe is what the serving log line says about the store; never a secret.
	describe []any
}

func openBackend(ctx context.Context, cfg config, log *slog.Logger) (backend, error) {
	if cfg.store == "embedded" {
		guard := diskspace.New(diskspace.Options{Dir: cfg.dataDir, MinFree: cfg.minFreeMiB << 20, Logger: log})
		db, err := pebble.Open(pebble.Options{Dir: cfg.dataDir, Logger: log, AdmitWrite: guard.Admit,
			CacheSize: int64(cfg.cacheSize), MemTableSize: uint64(cfg.memTableSize)})
		if err != nil {
			return backend{}, err
		}
		if removed, err := backup.RemoveStaleScratch(cfg.dataDir); err != nil {
			return backend{}, errors.Join(err, db.Close())
		} else if removed {
			log.Warn("removed the scratch directory of a backup cut short by the process's end", "data_dir", cfg.dataDir)
		}
		// Writes are not served while space is low, nor while the engine's
		// flushes fail, when they wait until the engine stops the process.
		writeCheck := func() error { return errors.Join(guard.Check(), db.FlushesFailing()) }
		return backend{tables: db, embedded: db, close: db.Close, writeCheck: writeCheck,
			describe: []any{"store", "embedded", "data_dir", cfg.dataDir}}, nil
	}
	a := cfg.azure
	tableOpts := aztable.Options{ConnectionString: a.connectionString, TablePrefix: a.tablePrefix, Logger: log}
	queueOpts := azqueue.Options{ConnectionString: a.connectionString, Name: a.queue}
	endpoint := "connection string"
	if a.connectionString == "" {
		cred, err := azidentity.NewDefaultAzureCredential(nil)
		if err != nil {
			return backend{}, fmt.Errorf("azure credential: %w", err)
		}
		tableOpts.ServiceURL, tableOpts.Credential = a.tableURL, cred
		queueOpts.ServiceURL, queueOpts.Credential = a.queueURL, cred
		endpoint = a.tableURL
	}
	tables, err := aztable.Open(ctx, tableOpts)
	if err != nil {
		return backend{}, err
	}
	queue, err := azqueue.Open(ctx, queueOpts)
	if err != nil {
		return backend{}, err
	}
	return backend{tables: tables, azure: tables, queue: queue, close: func() error { return nil },
		describe: []any{"store", "azure", "endpoint", endpoint, "queue", a.queue}}, nil
}

// reachable reads one row of table: a store that answers, even "not
// found", can be reached.
func reachable(table store.Table) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		_, err := table.Get(ctx, "health", "probe")
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		return err
	}
}
