package images

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/metadatad/metadatad/store"
)

// maxIndexShards bounds Options.IndexShards: beyond it a minute's rows are
// spread thinner than any partition's throughput calls for.
const maxIndexShards = 1000

// DefaultBatchConcurrency bounds the cameras BatchLatest reads at once.
const DefaultBatchConcurrency = 16

// Defaults of the bound on a create's primary write without a transaction;
// see Options.CreateTimeout and Options.LandingMargin.
const (
	DefaultCreateTimeout = 30 * time.Second
	// DefaultLandingMargin covers Azure Table Storage's server timeout (30
	// seconds: a request it has not finished by then fails) and the transit
	// of a request already sent, with room to spare.
	DefaultLandingMargin = 90 * time.Second
)

// Options configures Open.
type Options struct {
	// Kind is the image kind the repository serves; required.
	Kind Kind
	// Table is the primary table name; empty means Kind.DefaultTable(). The
	// index table is always IndexTable(Table).
	Table string
	// BatchConcurrency bounds the cameras BatchLatest reads at once; 0 means
	// DefaultBatchConcurrency.
	BatchConcurrency int
	// IndexShards spreads each minute's index rows over this many
	// partitions, yyyyMMddHHmm_<n> with n = hash(camera id) mod IndexShards,
	// since Azure serves about 2,000 entities per second per partition and
	// every create of a minute lands in that minute's partition. 0 or 1
	// writes the .NET system's exact format, yyyyMMddHHmm. Retention needs
	// no change: "202601010000_3" sorts before "202601010001", so the
	// expired partitions stay one range.
	IndexShards int
	// CreateTimeout bounds a create on a backend without transactions
	// (Azure): it writes its index row, then its primary row, and gives up
	// the primary write this long after it started, so that the purge knows
	// when a primary row can no longer appear behind its index row (see
	// IndexLag). 0 means DefaultCreateTimeout.
	CreateTimeout time.Duration
	// LandingMargin is how long after a create gave up a primary write it
	// had already sent may still land at the backend. 0 means
	// DefaultLandingMargin.
	LandingMargin time.Duration
	// Created, if set, is told of each image a Create or BatchCreate
	// stored (or found stored identically), once durable and before the reply: how the fleet's
	// per-camera table learns of cameras on a backend without tallies
	// (store/fleet). It cannot fail the create.
	Created func(ctx context.Context, img Image)
}

// Repository reads and writes one image kind's primary and index tables.
type Repository struct {
	kind        Kind
	primary     store.Table
	index       store.Table
	pointers    store.Table // nil for a kind without filtered reads
	transactor  store.Transactor
	concurrency int
	shards      int
	timeout     time.Duration
	lag         time.Duration
	created     func(context.Context, Image)
}

// Open opens (creating if needed) the kind's two tables on backend.
func Open(ctx context.Context, backend store.Backend, opts Options) (*Repository, error) {
	if opts.Kind < Single || opts.Kind > PreStitch {
		return nil, fmt.Errorf("images: unknown kind %d", opts.Kind)
	}
	if opts.Table == "" {
		opts.Table = opts.Kind.DefaultTable()
	}
	if opts.BatchConcurrency <= 0 {
		opts.BatchConcurrency = DefaultBatchConcurrency
	}
	primary, err := backend.Table(ctx, opts.Table)
	if err != nil {
		return nil, fmt.Errorf("images: open %s: %w", opts.Table, err)
	}
	index, err := backend.Table(ctx, IndexTable(opts.Table))
	if err != nil {
		return nil, fmt.Errorf("images: open %s: %w", IndexTable(opts.Table), err)
	}
	var pointers store.Table
	if opts.Kind.HasPointers() {
		if pointers, err = backend.Table(ctx, PointerTable(opts.Table)); err != nil {
			return nil, fmt.Errorf("images: open %s: %w", PointerTable(opts.Table), err)
		}
	}
	if opts.IndexShards < 0 || opts.IndexShards > maxIndexShards {
		return nil, fmt.Errorf("images: IndexShards %d outside 0 to %d", opts.IndexShards, maxIndexShards)
	}
	if opts.CreateTimeout <= 0 {
		opts.CreateTimeout = DefaultCreateTimeout
	}
	if opts.LandingMargin <= 0 {
		opts.LandingMargin = DefaultLandingMargin
	}
	r := &Repository{kind: opts.Kind, primary: primary, index: index, pointers: pointers, concurrency: opts.BatchConcurrency,
		shards: opts.IndexShards, timeout: opts.CreateTimeout, created: opts.Created}
	r.transactor, _ = backend.(store.Transactor)
	if r.transactor == nil {
		r.lag = opts.CreateTimeout + opts.LandingMargin
	}
	return r, nil
}

// IndexLag is the longest a primary row may land after its index row was
// written, by the backend's clock: 0 where a transaction writes both, else
// CreateTimeout plus LandingMargin. An index row older than IndexLag whose
// primary row is not there now will never get it, so the purge may delete
// it; a younger one may still be waiting for its primary row.
func (r *Repository) IndexLag() time.Duration { return r.lag }

// Kind is the image kind the repository serves.
func (r *Repository) Kind() Kind { return r.kind }

// IndexShards is how many index partitions each capture minute has (1 or
// more), so a reader can weigh a scan of the index against per-camera reads.
func (r *Repository) IndexShards() int { return max(1, r.shards) }

// Tables are the primary and index tables, for the retention engine. The
// pointer table, if the kind has one, needs no purge (see PointerTable).
func (r *Repository) Tables() (primary, index store.Table) { return r.primary, r.index }

// IndexKeys are the keys the index row of a camera's primary row may have:
// this service's form, in the partition of the row's capture minute and,
// with shards, its camera's shard; and the fleet's (see parseIndexKey),
// which knows no shards. The index key is a function of the primary key, so a purge that
// deletes primary rows can delete their index rows without reading them.
func (r *Repository) IndexKeys(cameraID, primaryRowKey string) []store.Key {
	own, ok := r.IndexKey(cameraID, primaryRowKey)
	if !ok {
		return nil
	}
	captured, _ := store.TimeFromInvertedTicksRowKey(primaryRowKey)
	return []store.Key{own, {PartitionKey: store.MinutePartitionKey(captured), RowKey: cameraID + "_" + primaryRowKey}}
}

// IndexKey is the first of IndexKeys, this service's form: the only one
// a purge need delete from an index that holds no other
// (store.PurgeBatch.InstantFirst). ok is false for a row key that is no
// capture instant.
func (r *Repository) IndexKey(cameraID, primaryRowKey string) (key store.Key, ok bool) {
	captured, err := store.TimeFromInvertedTicksRowKey(primaryRowKey)
	if err != nil {
		return store.Key{}, false
	}
	return store.Key{PartitionKey: IndexPartitionKey(captured, cameraID, r.shards), RowKey: IndexRowKey(primaryRowKey, cameraID)}, true
}

// Create stores img's primary and index rows and returns img as stored:
// captured_at at tick precision and RowKey set. Creating an identical image
// again succeeds, so a client may retry; a different image for the same
// camera and instant fails with store.ErrAlreadyExists.
func (r *Repository) Create(ctx context.Context, img Image) (Image, error) {
	img.CapturedAt = store.TruncateToTicks(img.CapturedAt)
	img.RowKey = store.InvertedTicksRowKey(img.CapturedAt)
	primary := r.kind.primaryEntity(img)
	index := r.indexEntity(img, primary)
	var err error
	if r.transactor != nil {
		err = r.createAtomically(ctx, img, index, primary)
	} else {
		// Index first: an index row without its primary row is harmless (the
		// purge finds nothing to delete), a primary row without its index row
		// would never expire. A primary that breaks the limits must not get
		// as far as its index row: nothing is written for bad input.
		if err = store.ValidateEntity(primary); err != nil {
			return Image{}, err
		}
		err = r.createIndexFirst(ctx, index, primary)
		if err == nil {
			// After the primary row, before the acknowledgement: a crash
			// in between leaves an unacknowledged image, whose retry lands
			// in resolveDuplicate and widens the pointer there.
			err = r.widenFor(ctx, img)
		}
	}
	if errors.Is(err, store.ErrAlreadyExists) {
		// A retry may be the first attempt that reaches the reply.
		img, err = r.resolveDuplicate(ctx, primary)
	}
	if err != nil {
		return Image{}, err
	}
	if r.created != nil {
		r.created(ctx, img)
	}
	return img, nil
}

// createAtomically writes img's index row, primary row and pointer row in
// one transaction, reading the pointer again when another create widened
// it between the read and the commit.
func (r *Repository) createAtomically(ctx context.Context, img Image, index, primary store.Entity) error {
	ops := []store.TableOp{
		{Table: r.index, Op: store.Op{Kind: store.OpUpsert, Mode: store.Replace, Entity: index}},
		{Table: r.primary, Op: store.Op{Kind: store.OpInsert, Entity: primary}},
	}
	key, keeps := r.pointerKey(img)
	if !keeps {
		return r.transactor.Transact(ctx, ops)
	}
	for range maxPointerAttempts {
		op, err := r.pointerWrite(ctx, img.CameraID, key, img.RowKey, img.RowKey)
		if err != nil {
			return err
		}
		withPointer := ops
		if op != nil {
			withPointer = append(ops[:len(ops):len(ops)], store.TableOp{Table: r.pointers, Op: *op})
		}
		err = r.transactor.Transact(ctx, withPointer)
		var be *store.BatchError
		if !errors.As(err, &be) || be.Index != len(ops) || !lostRace(err) {
			return err
		}
	}
	return fmt.Errorf("images: pointer %s of camera %s changed %d times in a row", key, img.CameraID, maxPointerAttempts)
}

// createIndexFirst writes the index row, then the primary row, within
// CreateTimeout of its start: past it the primary write is abandoned (a
// write already sent lands within LandingMargin or not at all), so the
// primary row lands no later than IndexLag after the index row, whatever the
// backend's retries and backoffs. The deadline is measured from before the
// index write, so it bounds the lag from the index row's own timestamp too.
func (r *Repository) createIndexFirst(ctx context.Context, index, primary store.Entity) error {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	if _, err := r.index.Upsert(ctx, index, store.Replace); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("images: create of camera %s gave up before its primary row: %w", primary.PartitionKey, err)
	}
	_, err := r.primary.Insert(ctx, primary)
	return err
}

// resolveDuplicate tells a retried create from a conflicting one.
func (r *Repository) resolveDuplicate(ctx context.Context, want store.Entity) (Image, error) {
	stored, err := store.ResolveInsert(ctx, r.primary, want)
	if errors.Is(err, store.ErrAlreadyExists) {
		return Image{}, fmt.Errorf("images: camera %s already has a different image at row %s: %w",
			want.PartitionKey, want.RowKey, err)
	}
	if err != nil {
		return Image{}, err
	}
	img, err := imageFromEntity(stored)
	if err != nil {
		return Image{}, err
	}
	// The first attempt may have stopped between its primary row and its
	// pointer: the retry finishes its work.
	return img, r.widenFor(ctx, img)
}

// Span bounds capture times to [Start, End); a nil bound is open.
type Span struct {
	Start, End *time.Time
}

// Filter narrows a listing to the images that match every set field.
type Filter struct {
	// ClearDayOnly keeps pano images taken on a clear day.
	ClearDayOnly bool
	// CorrelationID keeps pre-stitch images of one pano.
	CorrelationID string
}

func (f Filter) where() []store.Equal {
	var w []store.Equal
	if f.ClearDayOnly {
		w = append(w, store.Equal{Property: PropIsClearDay, Value: true})
	}
	if f.CorrelationID != "" {
		w = append(w, store.Equal{Property: PropCorrelationID, Value: f.CorrelationID})
	}
	return w
}

// ListOptions selects one page of one camera's images.
type ListOptions struct {
	CameraID string
	Span     Span
	Filter   Filter
	// Limit caps the page: 1 to store.MaxPageSize.
	Limit int
	// Resume continues after a previous page; nil starts with the newest.
	Resume *store.Cursor
}

// List returns one page of a camera's images, newest first, and the cursor
// of the next page (nil on the last). The page holds Limit images unless it
// is the last. A filter the kind keeps pointers for (pano's ClearDayOnly,
// pre-stitch's CorrelationID) reads only the rows its pointer bounds.
func (r *Repository) List(ctx context.Context, opts ListOptions) ([]Image, *store.Cursor, error) {
	q := store.Query{
		PartitionKey: opts.CameraID,
		Rows:         store.InvertedTicksRows(opts.Span.Start, opts.Span.End),
		Where:        opts.Filter.where(),
	}
	if key, ok := r.filterPointer(opts.Filter); ok {
		rows, found, err := r.pointerRows(ctx, opts.CameraID, key)
		if err != nil {
			return nil, nil, err
		}
		if q.Rows, ok = intersect(q.Rows, rows); !found || !ok {
			return nil, nil, nil
		}
	}
	return store.ReadPage(opts.Limit, opts.Resume, func(resume *store.Cursor, want int) (store.Page, error) {
		q.Resume, q.Limit = resume, want
		return r.primary.Query(ctx, q)
	}, imageFromEntity)
}

// intersect is the range of the rows in both a and b; ok is false when
// there is none.
func intersect(a, b store.Range) (store.Range, bool) {
	out := store.Range{From: max(a.From, b.From), To: a.To}
	if out.To == "" || (b.To != "" && b.To < out.To) {
		out.To = b.To
	}
	return out, out.To == "" || out.From < out.To
}

// Latest returns the camera's newest image within span that matches filter;
// store.ErrNotFound if there is none.
func (r *Repository) Latest(ctx context.Context, cameraID string, span Span, filter Filter) (Image, error) {
	imgs, _, err := r.List(ctx, ListOptions{CameraID: cameraID, Span: span, Filter: filter, Limit: 1})
	if err != nil {
		return Image{}, err
	}
	if len(imgs) == 0 {
		return Image{}, fmt.Errorf("images: camera %s has no %s image: %w", cameraID, r.kind, store.ErrNotFound)
	}
	return imgs[0], nil
}

// BatchLatest returns the newest image within span of each camera that has
// one, in the order of cameraIDs, each camera once. Cameras are read
// concurrently, at most BatchConcurrency at a time.
func (r *Repository) BatchLatest(ctx context.Context, cameraIDs []string, span Span) ([]Image, error) {
	unique := make([]string, 0, len(cameraIDs))
	seen := make(map[string]bool, len(cameraIDs))
	for _, id := range cameraIDs {
		if !seen[id] {
			seen[id] = true
			unique = append(unique, id)
		}
	}
	found := make([]*Image, len(unique))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(r.concurrency)
	for i, id := range unique {
		g.Go(func() (err error) {
			// A panic here would bypass the caller's recovery, which guards
			// only its own goroutine, and end the process.
			defer func() {
				if p := recover(); p != nil {
					err = fmt.Errorf("images: panic reading camera %s: %v\n%s", id, p, debug.Stack())
				}
			}()
			img, err := r.Latest(gctx, id, span, Filter{})
			if errors.Is(err, store.ErrNotFound) {
				return nil
			}
			if err != nil {
				return err
			}
			found[i] = &img
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	out := make([]Image, 0, len(unique))
	for _, img := range found {
		if img != nil {
			out = append(out, *img)
		}
	}
	return out, nil
}
