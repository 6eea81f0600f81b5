package video

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/metadatad/metadatad/store"
)

// DefaultTable is the table name used when Options.Table is empty.
const DefaultTable = "VideoMetadata"

// Options configures Open.
type Options struct {
	// Table is the table name; empty means DefaultTable.
	Table string
}

// Repository reads and writes the video metadata table.
type Repository struct {
	table store.Table
}

// Open opens (creating if needed) the table on backend.
func Open(ctx context.Context, backend store.Backend, opts Options) (*Repository, error) {
	if opts.Table == "" {
		opts.Table = DefaultTable
	}
	table, err := backend.Table(ctx, opts.Table)
	if err != nil {
		return nil, fmt.Errorf("video: open %s: %w", opts.Table, err)
	}
	return &Repository{table: table}, nil
}

// Create stores m and returns it as stored: captured_at and duration at
// tick precision and RowKey set. Creating an identical recording again
// succeeds, so a client may retry; a different recording for the same
// camera and start instant fails with store.ErrAlreadyExists.
func (r *Repository) Create(ctx context.Context, m Metadata) (Metadata, error) {
	m.CapturedAt = store.TruncateToTicks(m.CapturedAt)
	m.Duration = m.Duration.Truncate(ticksPerDuration)
	m.RowKey = store.InvertedTicksRowKey(m.CapturedAt)
	e := entity(m)
	_, err := r.table.Insert(ctx, e)
	if errors.Is(err, store.ErrAlreadyExists) {
		stored, err := store.ResolveInsert(ctx, r.table, e)
		if errors.Is(err, store.ErrAlreadyExists) {
			return Metadata{}, fmt.Errorf("video: camera %s already has a different recording at row %s: %w",
				e.PartitionKey, e.RowKey, err)
		}
		if err != nil {
			return Metadata{}, err
		}
		return fromEntity(stored)
	}
	if err != nil {
		return Metadata{}, err
	}
	return m, nil
}

// ListOptions selects one page of one camera's recordings.
type ListOptions struct {
	CameraID string
	// Start and End bound the start of the recordings to [Start, End); a nil
	// bound is open.
	Start, End *time.Time
	// Limit caps the page: 1 to store.MaxPageSize.
	Limit int
	// Resume continues after a previous page; nil starts with the newest.
	Resume *store.Cursor
}

// List returns one page of a camera's recordings, newest first, and the
// cursor of the next page (nil on the last). The page holds Limit
// recordings unless it is the last.
func (r *Repository) List(ctx context.Context, opts ListOptions) ([]Metadata, *store.Cursor, error) {
	q := store.Query{PartitionKey: opts.CameraID, Rows: store.InvertedTicksRows(opts.Start, opts.End)}
	return store.ReadPage(opts.Limit, opts.Resume, func(resume *store.Cursor, want int) (store.Page, error) {
		q.Resume, q.Limit = resume, want
		return r.table.Query(ctx, q)
	}, fromEntity)
}

// Latest returns the camera's newest recording; store.ErrNotFound if it
// has none.
func (r *Repository) Latest(ctx context.Context, cameraID string) (Metadata, error) {
	ms, _, err := r.List(ctx, ListOptions{CameraID: cameraID, Limit: 1})
	if err != nil {
		return Metadata{}, err
	}
	if len(ms) == 0 {
		return Metadata{}, fmt.Errorf("video: camera %s has no recording: %w", cameraID, store.ErrNotFound)
	}
	return ms[0], nil
}
