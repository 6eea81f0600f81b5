package acquisition

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/metadatad/metadatad/store"
)

// DefaultTable is the instance table name used when Options.Table is empty.
const DefaultTable = "ImageAcquisitionInstance"

// ActiveTable is the name of the active table of an instance table.
func ActiveTable(instances string) string { return instances + "Active" }

// recordAttempts bounds the rounds of a record that keeps losing races to
// other records of the same instance; a healthy store never needs more than
// a few.
const recordAttempts = 100

// Options configures Open.
type Options struct {
	// Table is the instance table name; empty means DefaultTable. The active
	// table is always ActiveTable(Table).
	Table string
	// Now is the clock for windows and default update times; nil means time.Now.
	Now func() time.Time
	// Logger gets the failures a record survives; nil means slog.Default.
	Logger *slog.Logger
}

// Repository reads and writes the instance and active tables.
type Repository struct {
	instances store.Table
	active    store.Table
	now       func() time.Time
	log       *slog.Logger
}

// Open opens (creating if needed) the two tables on backend.
func Open(ctx context.Context, backend store.Backend, opts Options) (*Repository, error) {
	if opts.Table == "" {
		opts.Table = DefaultTable
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	instances, err := backend.Table(ctx, opts.Table)
	if err != nil {
		return nil, fmt.Errorf("acquisition: open %s: %w", opts.Table, err)
	}
	active, err := backend.Table(ctx, ActiveTable(opts.Table))
	if err != nil {
		return nil, fmt.Errorf("acquisition: open %s: %w", ActiveTable(opts.Table), err)
	}
	return &Repository{instances: instances, active: active, now: opts.Now, log: opts.Logger}, nil
}

// Record stores in under its id, replacing what was there, and returns it
// as stored: times at tick precision, a zero LastUpdated set to now and a
// zero Created set to the stored instance's, or to LastUpdated for a new
// instance.
func (r *Repository) Record(ctx context.Context, in Instance) (Instance, error) {
	if in.LastUpdated.IsZero() {
		in.LastUpdated = r.now()
	}
	in.LastUpdated = store.TruncateToTicks(in.LastUpdated)
	created := in.Created
	for attempt := 1; ; attempt++ {
		stored, err := r.instances.Get(ctx, in.ID, InstanceRowKey)
		found := err == nil
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return Instance{}, err
		}
		var old Instance
		if found {
			old = instanceFromEntity(stored)
		}
		in.Created = created
		if in.Created.IsZero() {
			in.Created = old.Created
		}
		if in.Created.IsZero() {
			in.Created = in.LastUpdated
		}
		in.Created = store.TruncateToTicks(in.Created)

		key, active := activeKey(in)
		superseded, err := r.superseded(ctx, old, key, active)
		if err != nil {
			return Instance{}, err
		}
		// The new active row goes first, so that an active instance is
		// never without its row.
		if active {
			row := store.Entity{PartitionKey: key.PartitionKey, RowKey: key.RowKey, Properties: properties(in)}
			if _, err := r.active.Upsert(ctx, row, store.Replace); err != nil {
				return Instance{}, err
			}
		}
		e := store.Entity{PartitionKey: in.ID, RowKey: InstanceRowKey, Properties: properties(in)}
		if found {
			_, err = r.instances.Update(ctx, e, store.Replace, stored.ETag)
		} else {
			_, err = r.instances.Insert(ctx, e)
		}
		if errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrAlreadyExists) {
			// Another record of the instance came between the read and the
			// write: record again over what it wrote.
			if attempt < recordAttempts {
				continue
			}
			return Instance{}, fmt.Errorf("acquisition: instance %s keeps changing: %w", in.ID, store.ErrConflict)
		}
		if err != nil {
			return Instance{}, err
		}
		if superseded != nil {
			// The record is durable. The delete is conditional, so it never
			// removes a row another record wrote since the read; a row it
			// leaves, failing or not, no longer matches the instance and
			// ListActive skips it, but stays in the table: say so.
			err := r.active.Delete(ctx, superseded.PartitionKey, superseded.RowKey, superseded.ETag)
			if err != nil && !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrConflict) {
				r.log.Warn("acquisition: dropping an instance's superseded active row failed; listings skip it, the row stays",
					"instance", in.ID, "partition", superseded.PartitionKey, "row", superseded.RowKey, "err", err)
			}
		}
		return in, nil
	}
}

// superseded is the active row of old, the stored instance, that a record
// of an instance whose active row is key (if active) leaves behind; nil when
// there is none.
func (r *Repository) superseded(ctx context.Context, old Instance, key store.Key, active bool) (*store.Entity, error) {
	oldKey, had := activeKey(old)
	if !had || (active && oldKey == key) {
		return nil, nil
	}
	row, err := r.active.Get(ctx, oldKey.PartitionKey, oldKey.RowKey)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &row, nil
}

// currentReads bounds the instance reads ListActive runs at once.
const currentReads = 16

// ListOptions selects one page of active instances.
type ListOptions struct {
	// Within is how long before now the last update may be: instances
	// updated at or after now - Within are listed, later ones included.
	Within time.Duration
	// Limit caps the page: 1 to store.MaxPageSize.
	Limit int
	// Resume continues after a previous page; nil starts at the window's start.
	Resume *store.Cursor
}

// ListActive returns one page of the instances that are pending or running
// and were last updated within the window, by minute of last update then
// by id, and the cursor of the next page (nil on the last). The page holds
// Limit instances unless it is the last.
func (r *Repository) ListActive(ctx context.Context, opts ListOptions) ([]Instance, *store.Cursor, error) {
	since := r.now().Add(-opts.Within)
	scan := store.Scan{Partitions: store.Range{From: store.MinutePartitionKey(since)}}
	return store.ReadPage(opts.Limit, opts.Resume, func(resume *store.Cursor, want int) (store.Page, error) {
		scan.Resume, scan.Limit = resume, want
		page, err := r.active.Scan(ctx, scan)
		if err != nil {
			return store.Page{}, err
		}
		// One point read per active row, run a few at a time: on Azure a
		// page of them one after another would be a page of round trips.
		current := make([]*store.Entity, len(page.Entities))
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(currentReads)
		for i, row := range page.Entities {
			g.Go(func() error {
				e, ok, err := r.current(gctx, row)
				if ok && !instanceFromEntity(e).LastUpdated.Before(since) {
					current[i] = &e
				}
				return err
			})
		}
		if err := g.Wait(); err != nil {
			return store.Page{}, err
		}
		page.Entities = page.Entities[:0]
		for _, e := range current {
			if e != nil {
				page.Entities = append(page.Entities, *e)
			}
		}
		return page, nil
	}, store.Decoded(instanceFromEntity))
}

// current reads the instance row of an active row and reports whether the
// active row is the instance's current one, not one left behind.
func (r *Repository) current(ctx context.Context, row store.Entity) (store.Entity, bool, error) {
	e, err := r.instances.Get(ctx, row.RowKey, InstanceRowKey)
	if errors.Is(err, store.ErrNotFound) {
		return store.Entity{}, false, nil
	}
	if err != nil {
		return store.Entity{}, false, err
	}
	key, active := activeKey(instanceFromEntity(e))
	return e, active && key == store.Key{PartitionKey: row.PartitionKey, RowKey: row.RowKey}, nil
}
