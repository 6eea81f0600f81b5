package images

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"golang.org/x/sync/errgroup"

	"github.com/metadatad/metadatad/store"
)

// MaxBatchCreate bounds the images of one BatchCreate.
const MaxBatchCreate = 1000

// batchWriters bounds the backend batches a round of BatchCreate writes at
// once on a backend without transactions.
const batchWriters = 8

// CreateResult is the outcome of one image of BatchCreate.
type CreateResult struct {
	// Image is the image as stored, when Err is nil.
	Image Image
	// Existed tells that an identical image was stored already (a retry,
	// or an earlier copy in the same call) rather than created.
	Existed bool
	// Err is what Create would have returned for the image alone.
	Err error
}

// pending is one image of a BatchCreate on its way to the store.
type pending struct {
	at      int // position in the call
	img     Image
	primary store.Entity
	index   store.Entity
}

// BatchCreate stores up to MaxBatchCreate images, of any cameras and
// instants, and returns one result per image in their order: each image
// is created, found stored identically, or fails alone, as Create would
// have it. Writes are grouped into the backend's batches: on a backend
// with transactions, images of neighbouring keys share one atomic commit,
// which holds each image's index, primary and pointer rows; without, each
// round of images writes its index rows a batch per index partition, then
// its primary rows a batch per camera within CreateTimeout of the round's
// start, then its pointers, so each image keeps Create's order.
func (r *Repository) BatchCreate(ctx context.Context, imgs []Image) []CreateResult {
	results := make([]CreateResult, len(imgs))
	if len(imgs) > MaxBatchCreate {
		err := fmt.Errorf("images: %d images in one batch, at most %d: %w", len(imgs), MaxBatchCreate, store.ErrInvalidEntity)
		for i := range results {
			results[i].Err = err
		}
		return results
	}
	var todo, again []pending
	first := map[store.Key]int{}
	for i, img := range imgs {
		img.CapturedAt = store.TruncateToTicks(img.CapturedAt)
		img.RowKey = store.InvertedTicksRowKey(img.CapturedAt)
		primary := r.kind.primaryEntity(img)
		if err := store.ValidateEntity(primary); err != nil {
			results[i].Err = err
			continue
		}
		p := pending{at: i, img: img, primary: primary, index: r.indexEntity(img, primary)}
		// A second image of the same key is settled against the first
		// once that one is written, as a retried Create would be.
		key := store.Key{PartitionKey: primary.PartitionKey, RowKey: primary.RowKey}
		if _, dup := first[key]; dup {
			again = append(again, p)
			continue
		}
		first[key] = i
		todo = append(todo, p)
	}
	slices.SortFunc(todo, func(a, b pending) int {
		return cmp.Or(cmp.Compare(a.img.CameraID, b.img.CameraID), cmp.Compare(a.img.RowKey, b.img.RowKey))
	})
	var existing []pending
	if r.transactor != nil {
		existing = r.batchAtomically(ctx, todo, results)
	} else {
		existing = r.batchIndexFirst(ctx, todo, results)
	}
	for _, p := range append(existing, again...) {
		img, err := r.resolveDuplicate(ctx, p.primary)
		if errors.Is(err, store.ErrNotFound) {
			// The first image of this key failed, so this one does too.
			err = results[first[store.Key{PartitionKey: p.primary.PartitionKey, RowKey: p.primary.RowKey}]].Err
		}
		results[p.at] = CreateResult{Image: img, Existed: err == nil, Err: err}
	}
	if r.created != nil {
		for _, res := range results {
			if res.Err == nil {
				r.created(ctx, res.Image)
			}
		}
	}
	return results
}

// chunkOps is how many images batchAtomically commits at once: each has an
// index and a primary row, and may widen a pointer row of its own.
const chunkOps = store.MaxBatchOps / 3

// batchAtomically commits the images a chunk at a time, each chunk one
// transaction; it sets the results of the images it settles and returns
// those whose key is taken, for resolveDuplicate.
func (r *Repository) batchAtomically(ctx context.Context, todo []pending, results []CreateResult) (existing []pending) {
	// A pointer row is a few hundred bytes; a chunk's share is far below this.
	const pointerBytes = 64 << 10
	size := func(p pending) int { return store.EntitySize(p.primary) + store.EntitySize(p.index) }
	for _, chunk := range chunkBy(todo, chunkOps, store.MaxBatchBytes-pointerBytes, size) {
		existing = append(existing, r.commitChunk(ctx, chunk, results)...)
	}
	return existing
}

// commitChunk commits chunk in one transaction. An image whose write fails
// leaves the chunk, which is tried again without it; a pointer another
// create widened meanwhile is read again.
func (r *Repository) commitChunk(ctx context.Context, chunk []pending, results []CreateResult) (existing []pending) {
	chunk = slices.Clone(chunk)
	for attempt := 0; len(chunk) > 0; attempt++ {
		ops := make([]store.TableOp, 0, 3*len(chunk))
		for _, p := range chunk {
			ops = append(ops,
				store.TableOp{Table: r.index, Op: store.Op{Kind: store.OpUpsert, Mode: store.Replace, Entity: p.index}},
				store.TableOp{Table: r.primary, Op: store.Op{Kind: store.OpInsert, Entity: p.primary}})
		}
		pointerOps, err := r.pointerOps(ctx, chunk)
		if err == nil {
			err = r.transactor.Transact(ctx, append(ops, pointerOps...))
		}
		var be *store.BatchError
		switch {
		case err == nil:
			for _, p := range chunk {
				results[p.at] = CreateResult{Image: p.img}
			}
			return existing
		case !errors.As(err, &be) || (be.Index >= len(ops) && !lostRace(err)) || attempt > len(chunk)+maxPointerAttempts:
			for _, p := range chunk {
				results[p.at].Err = err
			}
			return existing
		case be.Index >= len(ops):
			continue // a pointer changed under us: read it again
		}
		failed := chunk[be.Index/2]
		if errors.Is(err, store.ErrAlreadyExists) {
			existing = append(existing, failed)
		} else {
			results[failed.at].Err = be.Err
		}
		chunk = slices.Delete(chunk, be.Index/2, be.Index/2+1)
	}
	return existing
}

// pointerSpan is the row keys a group of images brings to one pointer row.
type pointerSpan struct {
	camera, key    string
	newest, oldest string
}

// pointerSpans gathers, per pointer row, the span of row keys the images
// feed it, in a stable order.
func (r *Repository) pointerSpans(ps []pending) []pointerSpan {
	var spans []pointerSpan
	at := map[store.Key]int{}
	for _, p := range ps {
		key, ok := r.pointerKey(p.img)
		if !ok {
			continue
		}
		k := store.Key{PartitionKey: p.img.CameraID, RowKey: key}
		i, seen := at[k]
		if !seen {
			at[k] = len(spans)
			spans = append(spans, pointerSpan{camera: p.img.CameraID, key: key, newest: p.img.RowKey, oldest: p.img.RowKey})
			continue
		}
		spans[i].newest, spans[i].oldest = min(spans[i].newest, p.img.RowKey), max(spans[i].oldest, p.img.RowKey)
	}
	return spans
}

// pointerOps are the pointer writes that cover the images of a chunk.
func (r *Repository) pointerOps(ctx context.Context, chunk []pending) ([]store.TableOp, error) {
	var ops []store.TableOp
	for _, s := range r.pointerSpans(chunk) {
		op, err := r.pointerWrite(ctx, s.camera, s.key, s.newest, s.oldest)
		if err != nil {
			return nil, err
		}
		if op != nil {
			ops = append(ops, store.TableOp{Table: r.pointers, Op: *op})
		}
	}
	return ops, nil
}

// batchIndexFirst writes the images a round of store.MaxBatchOps at a time:
// index rows, then primary rows, then pointers, as createIndexFirst does
// for one image; it sets the results of the images it settles and returns
// those whose key is taken, for resolveDuplicate.
func (r *Repository) batchIndexFirst(ctx context.Context, todo []pending, results []CreateResult) (existing []pending) {
	for round := range slices.Chunk(todo, store.MaxBatchOps) {
		existing = append(existing, r.writeRound(ctx, round, results)...)
	}
	return existing
}

func (r *Repository) writeRound(ctx context.Context, round []pending, results []CreateResult) (existing []pending) {
	// The deadline starts before the index writes, as in createIndexFirst,
	// so every primary row lands within IndexLag of its index row.
	rctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	failed := make([]error, len(results))
	writeGroups(rctx, round, func(p pending) (string, int) { return p.index.PartitionKey, store.EntitySize(p.index) }, func(ctx context.Context, group []pending) {
		ops := make([]store.Op, len(group))
		for i, p := range group {
			ops[i] = store.Op{Kind: store.OpUpsert, Mode: store.Replace, Entity: p.index}
		}
		if err := r.index.Batch(ctx, ops); err != nil {
			for _, p := range group {
				failed[p.at] = err
			}
		}
	})
	written := slices.DeleteFunc(slices.Clone(round), func(p pending) bool { return failed[p.at] != nil })
	if err := rctx.Err(); err != nil {
		err = fmt.Errorf("images: batch gave up before its primary rows: %w", err)
		for _, p := range written {
			failed[p.at] = err
		}
		written = nil
	}
	taken := make([]bool, len(results))
	writeGroups(rctx, written, func(p pending) (string, int) { return p.img.CameraID, store.EntitySize(p.primary) }, func(ctx context.Context, group []pending) {
		r.insertPrimaryRows(ctx, group, failed, taken)
	})
	var stored []pending
	for _, p := range round {
		switch {
		case taken[p.at]:
			existing = append(existing, p)
		case failed[p.at] != nil:
			results[p.at].Err = failed[p.at]
		default:
			stored = append(stored, p)
		}
	}
	// After the primary rows, before the results: as in Create, a crash in
	// between leaves images unacknowledged, whose retry widens again.
	for _, s := range r.pointerSpans(stored) {
		if err := r.widen(ctx, s.camera, s.key, s.newest, s.oldest); err != nil {
			for _, p := range stored {
				if key, _ := r.pointerKey(p.img); p.img.CameraID == s.camera && key == s.key {
					failed[p.at] = err
				}
			}
		}
	}
	for _, p := range stored {
		results[p.at] = CreateResult{Image: p.img, Err: failed[p.at]}
	}
	return existing
}

// insertPrimaryRows inserts one camera's primary rows of a round in
// batches, noting in failed the error of each image that failed and in
// taken each whose key was already stored (a retry, told apart later).
func (r *Repository) insertPrimaryRows(ctx context.Context, group []pending, failed []error, taken []bool) {
	for len(group) > 0 {
		ops := make([]store.Op, len(group))
		for i, p := range group {
			ops[i] = store.Op{Kind: store.OpInsert, Entity: p.primary}
		}
		err := r.primary.Batch(ctx, ops)
		var be *store.BatchError
		if err == nil || !errors.As(err, &be) {
			for _, p := range group {
				failed[p.at] = err
			}
			return
		}
		if !errors.Is(err, store.ErrAlreadyExists) {
			failed[group[be.Index].at] = be.Err
			group = slices.Delete(group, be.Index, be.Index+1)
			continue
		}
		// One taken key often means many (a retried upload): find them all
		// in one read rather than a failed batch each.
		stored, err := r.storedKeys(ctx, group)
		if err != nil {
			for _, p := range group {
				failed[p.at] = err
			}
			return
		}
		stored[group[be.Index].primary.RowKey] = true
		group = slices.DeleteFunc(group, func(p pending) bool {
			taken[p.at] = stored[p.primary.RowKey]
			return taken[p.at]
		})
	}
}

// writeGroups calls write for each group of ps sharing a partition, within
// the limits of one batch, at most batchWriters calls at once.
// partitionOf names an image's partition and the size of its row there.
func writeGroups(ctx context.Context, ps []pending, partitionOf func(pending) (string, int), write func(context.Context, []pending)) {
	groups := map[string][]pending{}
	var order []string
	for _, p := range ps {
		k, _ := partitionOf(p)
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], p)
	}
	var g errgroup.Group
	g.SetLimit(batchWriters)
	for _, k := range order {
		size := func(p pending) int { _, n := partitionOf(p); return n }
		for _, group := range chunkBy(groups[k], store.MaxBatchOps, store.MaxBatchBytes, size) {
			g.Go(func() error {
				write(ctx, group)
				return nil
			})
		}
	}
	_ = g.Wait()
}

// chunkBy cuts ps, in order, into runs of at most n images whose sizes add
// up to at most bytes.
func chunkBy(ps []pending, n, bytes int, size func(pending) int) [][]pending {
	var out [][]pending
	start, sum := 0, 0
	for i, p := range ps {
		s := size(p)
		if i > start && (i-start == n || sum+s > bytes) {
			out = append(out, ps[start:i])
			start, sum = i, 0
		}
		sum += s
	}
	if start < len(ps) {
		out = append(out, ps[start:])
	}
	return out
}

// storedKeys reads which of the primary row keys of group, images of one
// camera in row-key order, are stored.
func (r *Repository) storedKeys(ctx context.Context, group []pending) (map[string]bool, error) {
	q := store.Query{PartitionKey: group[0].primary.PartitionKey,
		Rows: store.Range{From: group[0].primary.RowKey, To: group[len(group)-1].primary.RowKey + "0"}}
	stored := map[string]bool{}
	for {
		page, err := r.primary.Query(ctx, q)
		if err != nil {
			return nil, err
		}
		for _, e := range page.Entities {
			stored[e.RowKey] = true
		}
		if page.Next == nil {
			return stored, nil
		}
		q.Resume = page.Next
	}
}
