package queue

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention/policy"
)

// deleteExpired deletes a camera's primary rows in a row range, a batch of
// up to 100 at a time, each batch's index rows right after it by their
// derived keys, and reads the range again until it is empty; it returns
// how many primary rows it found and deleted. Primary rows go first, so a
// crash between leaves index rows without primary rows (the janitor's),
// never the reverse. Reading until empty also takes a row a retried create
// wrote again between a batch's two deletes, with its index row. With an
// outbox, each batch's outbox rows are written pending before it and
// marked ready after it.
func deleteExpired(ctx context.Context, repo *images.Repository, camera string, rows store.Range, ob *jobOutbox) (int64, error) {
	primary, index := repo.Tables()
	q := store.Query{PartitionKey: camera, Rows: rows, Limit: ob.batchRows()}
	ix := &indexDeleter{index: index, repo: repo, camera: camera}
	var n int64
	for {
		page, err := primary.Query(ctx, q)
		if err != nil {
			return n, err
		}
		if len(page.Entities) == 0 {
			if page.Next == nil {
				return n, nil
			}
			q.Resume = page.Next
			continue
		}
		deleted, err := deleteRecorded(ctx, primary, ix, ob, page.Entities)
		n += deleted
		if err != nil {
			return n, err
		}
	}
}

// deleteRecorded deletes a batch of a camera's primary rows, then their
// index rows, and returns how many of the rows are gone; with an outbox,
// their outbox rows are written pending before and marked ready after the
// primary delete, and a row changed since it was read stays (deleteRead).
func deleteRecorded(ctx context.Context, primary store.Table, ix *indexDeleter, ob *jobOutbox, rows []store.Entity) (int64, error) {
	keys := make([]store.Key, len(rows))
	for i, e := range rows {
		keys[i] = store.Key{PartitionKey: e.PartitionKey, RowKey: e.RowKey}
	}
	if err := ob.pending(ctx, ix.camera, rows); err != nil {
		return 0, err
	}
	if ob == nil {
		if err := deleteBatch(ctx, primary, keys); err != nil {
			return 0, err
		}
		return int64(len(keys)), ix.delete(ctx, keys)
	}
	if ob.beforeDelete != nil {
		ob.beforeDelete(rows)
	}
	gone, err := deleteRead(ctx, primary, rows)
	if err != nil {
		return 0, err
	}
	if err := ob.ready(ctx, ix.camera, gone); err != nil {
		return 0, err
	}
	// Only the gone rows' index rows: a row that stays keeps its own.
	keys = slices.DeleteFunc(keys, func(k store.Key) bool { return !gone[k.RowKey] })
	return int64(len(keys)), ix.delete(ctx, keys)
}

// deleteRead deletes a batch of a partition's rows at the ETags they were
// read with, and reports which rows are gone (deleted, or found gone). A
// row changed since it was read stays: a create wrote it again (the range
// is read again), or its job's end fenced it (reconcileOutbox), after
// which this delivery must not delete it unrecorded.
func deleteRead(ctx context.Context, t store.Table, rows []store.Entity) (map[string]bool, error) {
	ops := make([]store.Op, len(rows))
	for i, e := range rows {
		ops[i] = store.Op{Kind: store.OpDelete, IfMatch: e.ETag, Entity: store.Entity{PartitionKey: e.PartitionKey, RowKey: e.RowKey}}
	}
	gone := make(map[string]bool, len(rows))
	for len(ops) > 0 {
		err := t.Batch(ctx, ops)
		var be *store.BatchError
		switch {
		case err == nil:
			for _, op := range ops {
				gone[op.Entity.RowKey] = true
			}
			return gone, nil
		case !errors.As(err, &be):
			return nil, err
		case errors.Is(err, store.ErrNotFound):
			gone[ops[be.Index].Entity.RowKey] = true
		case !errors.Is(err, store.ErrConflict):
			return nil, err
		}
		ops = slices.Delete(ops, be.Index, be.Index+1)
	}
	return gone, nil
}

// thinQueried thins a camera's rows in its windows, on a backend without
// range deletions: it reads each window's rows, newest first, keeps each
// interval's keeper (policy.Intervals: its earliest row, a pano's earliest
// clear-day one when it has one), and, when del is set, deletes the others
// a batch of up to 100 at a time, each batch's index rows right after it
// by derived key (and its outbox rows around it), as deleteExpired does.
// It returns how many rows it deletes, or would.
func thinQueried(ctx context.Context, repo *images.Repository, camera string, windows []policy.Window, ob *jobOutbox, del bool) (int64, error) {
	primary, index := repo.Tables()
	th := &queriedThinner{primary: primary, ix: &indexDeleter{index: index, repo: repo, camera: camera},
		ob: ob, del: del, size: ob.batchRows(), prefer: policy.Prefer(repo.Kind())}
	for _, w := range windows {
		if err := th.window(ctx, camera, w); err != nil {
			return th.n, err
		}
	}
	if !del {
		return th.n, nil
	}
	return th.n, th.flush(ctx, true)
}

// queriedThinner is one thinQueried call: the rows it has still to delete
// and how many it deleted, or would.
type queriedThinner struct {
	primary store.Table
	ix      *indexDeleter
	ob      *jobOutbox
	del     bool
	size    int
	prefer  func(store.Entity) bool
	pending []store.Entity
	n       int64
}

// window reads one window's rows, newest first, through the keeper rule,
// and deletes (or counts) the rows it does not keep.
func (th *queriedThinner) window(ctx context.Context, camera string, w policy.Window) error {
	var from *time.Time
	if !w.From.IsZero() {
		from = &w.From
	}
	q := store.Query{PartitionKey: camera, Rows: store.InvertedTicksRows(from, &w.To)}
	intervals := policy.NewIntervals(w.Every, func(rows []store.Entity, keeper int) error {
		for i, e := range rows {
			if i != keeper {
				th.pending = append(th.pending, e)
			}
		}
		if !th.del { // a count: what would go
			th.n += int64(len(th.pending))
			th.pending = th.pending[:0]
			return nil
		}
		return th.flush(ctx, false)
	})
	for {
		page, err := th.primary.Query(ctx, q)
		if err != nil {
			return err
		}
		for _, e := range page.Entities {
			at, err := store.TimeFromInvertedTicksRowKey(e.RowKey)
			if err != nil {
				continue // not an image's key: not this thinning's
			}
			blob, _ := e.Properties[images.PropBlobURI].(string)
			row := store.Entity{PartitionKey: e.PartitionKey, RowKey: e.RowKey, ETag: e.ETag,
				Properties: store.Properties{images.PropBlobURI: blob}}
			if err := intervals.Add(at, row, th.prefer != nil && th.prefer(e)); err != nil {
				return err
			}
		}
		if page.Next == nil {
			return intervals.Close()
		}
		q.Resume = page.Next
	}
}

// flush deletes the pending rows in batches of the outbox's size, all of
// them or only whole batches.
func (th *queriedThinner) flush(ctx context.Context, all bool) error {
	for len(th.pending) >= th.size || (all && len(th.pending) > 0) {
		batch := th.pending[:min(len(th.pending), th.size)]
		deleted, err := deleteRecorded(ctx, th.primary, th.ix, th.ob, batch)
		th.n += deleted
		if err != nil {
			return err
		}
		th.pending = th.pending[len(batch):]
	}
	return nil
}

// indexDeleter deletes the index rows of one camera's deleted primary rows
// by their derived keys (images.Repository.IndexKeys): this service's form
// or the fleet's. Which one a row has is not known without reading it, so
// each key is tried in the form the camera's last found row had, then in
// the other; a camera's rows come in runs of one form, so a wrong guess
// costs one failed batch per run.
type indexDeleter struct {
	index  store.Table
	repo   *images.Repository
	camera string
	// form is the form (an index into IndexKeys' keys) tried first.
	form int
}

// indexCandidate is a primary row's index keys and the next form to try.
type indexCandidate struct {
	keys  []store.Key
	tried int
	form  int
}

func (c *indexCandidate) key() store.Key { return c.keys[c.form] }

func (x *indexDeleter) delete(ctx context.Context, primaryKeys []store.Key) error {
	todo := make([]*indexCandidate, 0, len(primaryKeys))
	for _, k := range primaryKeys {
		if keys := x.repo.IndexKeys(x.camera, k.RowKey); len(keys) > 0 {
			todo = append(todo, &indexCandidate{keys: keys, form: x.form % len(keys)})
		}
	}
	for len(todo) > 0 {
		var retry []*indexCandidate
		slices.SortFunc(todo, func(a, b *indexCandidate) int { return strings.Compare(a.key().PartitionKey, b.key().PartitionKey) })
		for start := 0; start < len(todo); {
			end := start
			for end < len(todo) && end-start < store.MaxBatchOps && todo[end].key().PartitionKey == todo[start].key().PartitionKey {
				end++
			}
			missing, err := x.deleteGroup(ctx, todo[start:end])
			if err != nil {
				return err
			}
			retry = append(retry, missing...)
			start = end
		}
		todo = retry
	}
	return nil
}

// deleteGroup deletes the current keys of candidates of one partition and
// returns those whose row was not found in that form but may be in another.
func (x *indexDeleter) deleteGroup(ctx context.Context, group []*indexCandidate) ([]*indexCandidate, error) {
	group = slices.Clone(group)
	var missing []*indexCandidate
	for len(group) > 0 {
		ops := make([]store.Op, len(group))
		for i, c := range group {
			k := c.key()
			ops[i] = store.Op{Kind: store.OpDelete, Entity: store.Entity{PartitionKey: k.PartitionKey, RowKey: k.RowKey}}
		}
		err := x.index.Batch(ctx, ops)
		var be *store.BatchError
		switch {
		case err == nil:
			x.form = group[0].form
			return missing, nil
		case !errors.As(err, &be) || !errors.Is(err, store.ErrNotFound):
			return nil, err
		}
		c := group[be.Index]
		group = slices.Delete(group, be.Index, be.Index+1)
		// Not in this form: in the other, or (a row its create never
		// indexed) in none.
		if c.tried++; c.tried < len(c.keys) {
			c.form = (c.form + 1) % len(c.keys)
			missing = append(missing, c)
		}
	}
	return missing, nil
}
