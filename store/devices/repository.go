package devices

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/metadatad/metadatad/store"
)

// DefaultTable is the table name used when Options.Table is empty.
const DefaultTable = "DurableEntityData"

// casAttempts bounds the read-merge-write rounds of an update that keeps
// losing races to other writers of the same device; a healthy store never
// needs more than a few.
const casAttempts = 100

// Options configures Open.
type Options struct {
	// Table is the table name; empty means DefaultTable.
	Table string
	// Now is the clock that stamps LastModified; nil means time.Now.
	Now func() time.Time
}

// Repository reads and writes the device state table.
type Repository struct {
	table store.Table
	now   func() time.Time
}

// Open opens (creating if needed) the table on backend.
func Open(ctx context.Context, backend store.Backend, opts Options) (*Repository, error) {
	if opts.Table == "" {
		opts.Table = DefaultTable
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	table, err := backend.Table(ctx, opts.Table)
	if err != nil {
		return nil, fmt.Errorf("devices: open %s: %w", opts.Table, err)
	}
	return &Repository{table: table, now: opts.Now}, nil
}

// Get returns one device's state; store.ErrNotFound if it has none.
func (r *Repository) Get(ctx context.Context, deviceID string) (State, error) {
	e, err := r.table.Get(ctx, deviceID, StateRowKey)
	if err != nil {
		return State{}, fmt.Errorf("devices: get %s: %w", deviceID, err)
	}
	return stateFromEntity(e), nil
}

// List returns one page of at most limit (1 to store.MaxPageSize) states in
// device id order, and the cursor of the next page (nil on the last).
func (r *Repository) List(ctx context.Context, limit int, resume *store.Cursor) ([]State, *store.Cursor, error) {
	return store.ReadPage(limit, resume, func(resume *store.Cursor, want int) (store.Page, error) {
		return r.table.Scan(ctx, store.Scan{Limit: want, Resume: resume})
	}, store.Decoded(stateFromEntity))
}

// Update is one change of one device's state.
type Update struct {
	// State names the device and holds the new values of Fields.
	State State
	// Fields are the fields to set; an unset value clears its field. Every
	// other field keeps its stored value.
	Fields []Field
	// AllowMissing creates the state of a device that has none; without
	// it such a device is store.ErrNotFound.
	AllowMissing bool
	// IfMatch, when set, is the ETag the stored state must have:
	// store.ErrConflict when it has another or there is none.
	IfMatch string
}

// Update merges u's fields into the device's state, stamps LastModified
// and returns the state as stored, with its new ETag.
func (r *Repository) Update(ctx context.Context, u Update) (State, error) {
	for _, f := range u.Fields {
		if err := f.valid(); err != nil {
			return State{}, err
		}
	}
	id := u.State.DeviceID
	values := u.State.properties()
	for attempt := 1; ; attempt++ {
		stored, err := r.table.Get(ctx, id, StateRowKey)
		found := err == nil
		switch {
		case err != nil && !errors.Is(err, store.ErrNotFound):
			return State{}, err
		case !found && !u.AllowMissing:
			return State{}, fmt.Errorf("devices: %s has no state: %w", id, store.ErrNotFound)
		case !found && u.IfMatch != "":
			return State{}, fmt.Errorf("devices: %s has no state to match etag %s: %w", id, u.IfMatch, store.ErrConflict)
		case found && u.IfMatch != "" && u.IfMatch != stored.ETag:
			return State{}, fmt.Errorf("devices: %s changed since etag %s: %w", id, u.IfMatch, store.ErrConflict)
		}
		props := store.Properties{}
		if found {
			props = maps.Clone(stored.Properties)
		}
		for _, f := range u.Fields {
			if v := values[string(f)]; unset(v) {
				delete(props, string(f))
			} else if t, ok := v.(time.Time); ok {
				props[string(f)] = store.TruncateToTicks(t)
			} else {
				props[string(f)] = v
			}
		}
		props[PropDeviceID] = id
		props[PropLastModified] = store.TruncateToTicks(r.now())
		e := store.Entity{PartitionKey: id, RowKey: StateRowKey, Properties: props}
		var written store.Entity
		if found {
			written, err = r.table.Update(ctx, e, store.Replace, stored.ETag)
		} else {
			written, err = r.table.Insert(ctx, e)
		}
		if err == nil {
			return stateFromEntity(written), nil
		}
		// Another writer came between the read and the write. Without an
		// ETag of its own the caller wants its fields merged into whatever
		// is there, so merge again; with one, the caller's view is stale.
		raced := errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrAlreadyExists)
		if !raced || u.IfMatch != "" || attempt == casAttempts {
			if raced {
				return State{}, fmt.Errorf("devices: %s changed during the update: %w", id, store.ErrConflict)
			}
			return State{}, err
		}
	}
}

// Delete removes the device's state: store.ErrNotFound if it has none, and
// store.ErrConflict if ifMatch is set and differs from its ETag.
func (r *Repository) Delete(ctx context.Context, deviceID, ifMatch string) error {
	if err := r.table.Delete(ctx, deviceID, StateRowKey, ifMatch); err != nil {
		return fmt.Errorf("devices: delete %s: %w", deviceID, err)
	}
	return nil
}
