package retention

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/retention/policy"
)

// The cap on prefix policies holds however many processes create them at
// once because their count is a row of their own partition, moved in the
// same batch as the row it counts: a create inserts its policy and sets
// the count one up at the ETag it read it at, a delete deletes its policy
// and sets the count one down, so the count always equals the rows and two
// creators cannot both take the last place (the second's batch conflicts
// and, read again, finds the cap reached). A batch of one partition is
// atomic on every backend (an entity group transaction on Azure); a count
// anywhere else would need a compensation after a failed insert, which a
// crash can skip, leaving places taken for good.
//
// A store written before the count existed gets it at its first prefix
// create or delete, from a count of the rows, inserted in that batch: any
// other create or delete in between inserted it too, so the batch fails
// and the next attempt reads it. The row has no days, so the purges'
// readers of every policy (shortest, Rules) pass it by; the listing
// leaves it out and its key is no prefix a caller may use.

// prefixCountRow is the row key of the count, in the prefix policies'
// partition.
const prefixCountRow = "~count of prefix policies"

const propCount = "Count"

// errReservedPrefix reports the one prefix the count's row takes.
var errReservedPrefix = fmt.Errorf("%w: the prefix %q is reserved", store.ErrInvalidKey, prefixCountRow)

// checkTarget refuses the policy whose row would be the count's.
func checkTarget(scope policy.Scope, target string) error {
	if scope == policy.ScopePrefix && target == prefixCountRow {
		return errReservedPrefix
	}
	return nil
}

func isPrefixCount(e store.Entity) bool {
	return e.PartitionKey == string(policy.ScopePrefix) && e.RowKey == prefixCountRow
}

// prefixCount reads the count of prefix policies and returns the batch
// operation that moves it by delta, conditional on the version read.
func (p *Policies) prefixCount(ctx context.Context, delta int64) (int64, store.Op, error) {
	count := func(n int64) store.Entity {
		return store.Entity{PartitionKey: string(policy.ScopePrefix), RowKey: prefixCountRow, Properties: store.Properties{propCount: n}}
	}
	e, err := p.policies.Get(ctx, string(policy.ScopePrefix), prefixCountRow)
	if errors.Is(err, store.ErrNotFound) {
		n, err := store.CountRows(ctx, p.policies, string(policy.ScopePrefix), store.Range{})
		if err != nil {
			return 0, store.Op{}, err
		}
		return n, store.Op{Kind: store.OpInsert, Entity: count(n + delta)}, nil
	}
	if err != nil {
		return 0, store.Op{}, err
	}
	n, _ := e.Properties[propCount].(int64)
	return n, store.Op{Kind: store.OpUpdate, Mode: store.Replace, Entity: count(n + delta), IfMatch: e.ETag}, nil
}

// countRaced reports a batch whose count operation (its first) lost to
// another create or delete: the batch is tried again on a fresh count.
func countRaced(err error) bool {
	var be *store.BatchError
	return errors.As(err, &be) && be.Index == 0 &&
		(errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrAlreadyExists) || errors.Is(err, store.ErrNotFound))
}

// insertPrefix inserts a prefix policy's row and counts it, unless the
// count has reached the cap: ErrTooManyPrefixes. It returns the row as
// stored, read back for its ETag.
func (p *Policies) insertPrefix(ctx context.Context, e store.Entity) (store.Entity, error) {
	for attempt := range casAttempts {
		n, count, err := p.prefixCount(ctx, 1)
		if err != nil {
			return store.Entity{}, err
		}
		if n >= int64(p.prefixCap()) {
			return store.Entity{}, fmt.Errorf("%w: at most %d", ErrTooManyPrefixes, p.prefixCap())
		}
		err = p.policies.Batch(ctx, []store.Op{count, {Kind: store.OpInsert, Entity: e}})
		switch {
		case countRaced(err):
			if err := backOff(ctx, attempt); err != nil {
				return store.Entity{}, err
			}
			continue
		case err != nil:
			return store.Entity{}, err
		}
		// A batch answers without ETags; a write since this one only makes
		// the caller's next conditional write conflict.
		return p.policies.Get(ctx, e.PartitionKey, e.RowKey)
	}
	return store.Entity{}, fmt.Errorf("retention: prefix policies: too many concurrent changes: %w", store.ErrConflict)
}

// deletePrefix deletes a prefix policy's row and uncounts it.
func (p *Policies) deletePrefix(ctx context.Context, prefix, ifMatch string) error {
	for attempt := range casAttempts {
		_, count, err := p.prefixCount(ctx, -1)
		if err != nil {
			return err
		}
		del := store.Op{Kind: store.OpDelete, Entity: store.Entity{PartitionKey: string(policy.ScopePrefix), RowKey: prefix}, IfMatch: ifMatch}
		err = p.policies.Batch(ctx, []store.Op{count, del})
		var be *store.BatchError
		switch {
		case countRaced(err):
			if err := backOff(ctx, attempt); err != nil {
				return err
			}
			continue
		case errors.As(err, &be):
			return be.Err
		}
		return err
	}
	return fmt.Errorf("retention: prefix policies: too many concurrent changes: %w", store.ErrConflict)
}

// backOff waits a random while, growing with attempt, before the next try
// at the count row: every prefix change of every replica updates that one
// row, and without a pause a crowd of them retries in step and keeps
// losing (16 at once exhausted casAttempts on a loaded machine).
func backOff(ctx context.Context, attempt int) error {
	t := time.NewTimer(rand.N(time.Duration(attempt+1) * time.Millisecond))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
