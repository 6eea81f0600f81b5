package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"

	"github.com/metadatad/metadatad/internal/diskspace"
	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/azqueue"
	"github.com/metadatad/metadatad/store/aztable"
	"github.com/metadatad/metadatad/store/pebble"
	"github.com/metadatad/metadatad/store/pebble/backup"
	"github.com/metadatad/metadatad/store/retention"
	"github.com/metadatad/metadatad/store/retention/queue"
)

// backend is the store the daemon runs on: its tables, the queue purge
// tasks go through (nil for the table queue in the store itself), and what
// to call when the daemon stops.
type backend struct {
	tables store.Backend
	queue  queue.Queue
	// purges is the backend's purge design: the embedded store's own, or
	// the queue design on Azure.
	purges retention.NewDriver
	close  func() error
	// writeCheck reports whether writes are accepted (free space, flushes
	// that succeed); nil when the backend has no such limit.
	writeCheck func() error
	// embedded is the embedded store, whose health metrics watch; nil on Azure.
	embedded *pebble.DB
	// azure is the Azure table backend, whose clock fallbacks metrics
	// watch; nil on the embedded store.
	azure *aztable.Backend
	// guard is the embedded store's free-space guard; nil on Azure.
	guard *diskspace.Guard
	// describe is what the serving log line says about the store; never a secret.
	describe []any
}

func openBackend(ctx context.Context, cfg config, log *slog.Logger) (backend, error) {
	if cfg.store == "embedded" {
		if err := refuseBackup(cfg.dataDir); err != nil {
			return backend{}, err
		}
		guard := diskspace.New(diskspace.Options{Dir: cfg.dataDir, MinFree: cfg.minFreeMiB << 20, Logger: log})
		db, err := pebble.Open(pebble.Options{Dir: cfg.dataDir, Logger: log, AdmitWrite: guard.Admit,
			CacheSize: int64(cfg.cacheSize), MemTableSize: uint64(cfg.memTableSize), StallLimit: cfg.writeStallLimit})
		if locked(err) {
			return backend{}, notAlone(cfg.dataDir, err, "another metadatad serves it: stop that one, or give this one another -data-dir")
		}
		if err != nil {
			return backend{}, err
		}
		if removed, err := backup.RemoveStaleScratch(cfg.dataDir); err != nil {
			return backend{}, errors.Join(err, db.Close())
		} else if removed {
			log.Warn("removed the scratch directory of a backup cut short by the process's end", "data_dir", cfg.dataDir)
		}
		// Writes are not served while space is low, nor while the engine's
		// flushes fail or its writes stall behind failing compactions, when
		// they wait until the engine stops the process.
		writeCheck := func() error { return errors.Join(guard.Check(), db.WritesBlocked()) }
		return backend{tables: db, embedded: db, guard: guard, purges: cfg.purgeLive.New, close: db.Close, writeCheck: writeCheck,
			describe: []any{"store", "embedded", "data_dir", cfg.dataDir}}, nil
	}
	a := cfg.azure
	tableOpts := aztable.Options{ConnectionString: a.connectionString, TablePrefix: a.tablePrefix, Logger: log}
	queueOpts := azqueue.Options{ConnectionString: a.connectionString, Name: a.queue, PoisonTTL: cfg.purgeJobRetention}
	endpoint := accountOf(a.connectionString)
	if a.connectionString == "" {
		cred, err := azidentity.NewDefaultAzureCredential(nil)
		if err != nil {
			return backend{}, fmt.Errorf("azure credential: %w", err)
		}
		tableOpts.ServiceURL, tableOpts.Credential = a.tableURL, cred
		queueOpts.ServiceURL, queueOpts.Credential = a.queueURL, cred
		endpoint = a.tableURL
	}
	var tables *aztable.Backend
	var purgeQueue *azqueue.Queue
	err := waitForAzure(ctx, cfg.azureStartTimeout, azureStartLogInterval, log, endpoint, func(ctx context.Context) error {
		var err error
		if tables, err = aztable.Open(ctx, tableOpts); err != nil {
			return err
		}
		purgeQueue, err = azqueue.Open(ctx, queueOpts)
		return err
	})
	if err != nil {
		return backend{}, err
	}
	purges := queue.New(queue.Options{Queue: purgeQueue, Workers: cfg.purgeWorkers})
	return backend{tables: tables, azure: tables, queue: purgeQueue, purges: purges, close: func() error { return nil },
		describe: []any{"store", "azure", "endpoint", endpoint, "queue", a.queue}}, nil
}

// azureStartLogInterval is how often the start says it still waits for
// Azure Storage.
const azureStartLogInterval = 5 * time.Second

// waitForAzure runs open, the first calls to Azure Storage, within
// timeout, logging that it waits at the start and every interval, so
// that an unreachable endpoint is neither silent nor waited for forever.
func waitForAzure(ctx context.Context, timeout, interval time.Duration, log *slog.Logger, endpoint string, open func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	log.Info("connecting to Azure Storage", "endpoint", endpoint, "timeout", timeout)
	done := make(chan error, 1)
	go func() { done <- open(ctx) }()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if err != nil && ctx.Err() != nil {
				return fmt.Errorf("azure storage at %s did not answer within -azure-start-timeout %s: %w; check the endpoint, the network and the credentials", endpoint, timeout, err)
			}
			return err
		case <-tick.C:
			log.Warn("still waiting for Azure Storage", "endpoint", endpoint, "waited", time.Since(start).Round(time.Second), "timeout", timeout)
		}
	}
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
