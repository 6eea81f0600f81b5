package retention

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
)

// deleteExpired deletes a camera's primary rows in a row range, a batch of
// up to 100 at a time, each batch's index rows right after it by their
// derived keys, and reads the range again until it is empty; it returns
// how many primary rows it found and deleted. Primary rows go first, so a
// crash between leaves index rows without primary rows (the janitor's),
// never the reverse. Reading until empty also takes a row a retried create
// wrote again between a batch's two deletes, with its index row.
func deleteExpired(ctx context.Context, repo *images.Repository, camera string, rows store.Range) (int64, error) {
	primary, index := repo.Tables()
	q := store.Query{PartitionKey: camera, Rows: rows, Limit: store.MaxBatchOps}
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
		keys := make([]store.Key, len(page.Entities))
		for i, e := range page.Entities {
			keys[i] = store.Key{PartitionKey: e.PartitionKey, RowKey: e.RowKey}
		}
		if err := deleteBatch(ctx, primary, keys); err != nil {
			return n, err
		}
		n += int64(len(keys))
		if err := ix.delete(ctx, keys); err != nil {
			return n, err
		}
	}
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
