package store

import (
	"context"
	"fmt"
)

// Driver is a storage engine as the portable layer drives it, in the manner
// of go-cloud's driver packages: the engine implements the operations and
// NewBackend checks every call against the contract before the engine sees
// it. An engine therefore trusts its input and never checks it again:
//
//   - table names pass ValidateTableName;
//   - written entities pass ValidateEntity, addressed ones ValidateAddress;
//   - batches pass ValidateBatch and hold at least one operation;
//   - a query's PartitionKey is a valid key, its Limit is 1 to MaxPageSize,
//     its Resume is nil or names its own partition, and every bound and
//     cursor key is empty or a valid key;
//   - every condition names a valid property and holds a value some entity
//     can store, so an engine that sends conditions to a service can send
//     each one; a query with a condition nothing can meet never reaches it;
//   - keys and ranges given to the fast paths are valid and never empty.
//
// An engine that breaks the contract on valid input is wrong; one that gets
// invalid input has a caller that bypassed NewBackend, which the engines'
// constructors prevent by handing out only the portable backend.
type Driver struct {
	// OpenTable returns the engine's table of the name. The table may
	// implement Counter; the portable table then does too, checked alike.
	OpenTable func(ctx context.Context, name string) (Table, error)
	// Transact, when the engine commits across tables, applies checked
	// operations as Transactor.Transact does; each operation's Table is one
	// that OpenTable returned. Nil when the engine cannot.
	Transact func(ctx context.Context, ops []TableOp) error
}

// NewBackend returns the portable Backend over an engine's driver: every
// backend refuses the same input with the same error, since one layer
// checks it. The result implements Transactor when d.Transact is set.
func NewBackend(d Driver) Backend {
	b := &backend{open: d.OpenTable}
	if d.Transact != nil {
		return &transactor{backend: b, transact: d.Transact}
	}
	return b
}

type backend struct {
	open func(ctx context.Context, name string) (Table, error)
}

func (b *backend) Table(ctx context.Context, name string) (Table, error) {
	if err := ValidateTableName(name); err != nil {
		return nil, err
	}
	d, err := b.open(ctx, name)
	if err != nil {
		return nil, err
	}
	return b.wrap(d), nil
}

type transactor struct {
	*backend
	transact func(ctx context.Context, ops []TableOp) error
}

// Transact hands the engine its own tables, and refuses tables of any
// other backend: an engine commits atomically only over its own.
func (b *transactor) Transact(ctx context.Context, ops []TableOp) error {
	if err := ValidateTransaction(ops); err != nil {
		return err
	}
	if len(ops) == 0 {
		return ctx.Err()
	}
	engine := make([]TableOp, len(ops))
	for i, op := range ops {
		p, ok := op.Table.(interface{ portable() *table })
		if !ok || p.portable().backend != b.backend {
			return &BatchError{Index: i, Err: fmt.Errorf("%w: table %s is not of this backend", ErrInvalidBatch, op.Table.Name())}
		}
		engine[i] = TableOp{Table: p.portable().engine, Op: op.Op}
	}
	return b.transact(ctx, engine)
}

// EngineTable returns the engine's table under a portable one, else t
// itself: how an engine finds its own table in one its callers hold.
func EngineTable(t Table) Table {
	if p, ok := t.(interface{ portable() *table }); ok {
		return p.portable().engine
	}
	return t
}

// table is the portable Table over an engine's table.
type table struct {
	engine  Table
	backend *backend
}

func (t *table) portable() *table { return t }

func (t *table) Name() string { return t.engine.Name() }

func (t *table) Insert(ctx context.Context, e Entity) (Entity, error) {
	if err := ValidateEntity(e); err != nil {
		return Entity{}, err
	}
	stored, err := t.engine.Insert(ctx, e)
	if err != nil {
		return Entity{}, err
	}
	return written(e, stored), nil
}

func (t *table) Upsert(ctx context.Context, e Entity, mode WriteMode) (Entity, error) {
	if err := checkMode(mode); err != nil {
		return Entity{}, err
	}
	if err := ValidateEntity(e); err != nil {
		return Entity{}, err
	}
	stored, err := t.engine.Upsert(ctx, e, mode)
	if err != nil {
		return Entity{}, err
	}
	return written(e, stored), nil
}

func (t *table) Update(ctx context.Context, e Entity, mode WriteMode, ifMatch string) (Entity, error) {
	if err := checkMode(mode); err != nil {
		return Entity{}, err
	}
	if err := ValidateEntity(e); err != nil {
		return Entity{}, err
	}
	stored, err := t.engine.Update(ctx, e, mode, ifMatch)
	if err != nil {
		return Entity{}, err
	}
	return written(e, stored), nil
}

// written is what a write returns: the entity as the caller wrote it,
// stamped with the engine's ETag and Timestamp. A Merge thus returns the
// properties it named, not the merged set, as Azure does: its Merge Entity
// and Insert Or Merge Entity answer 204 No Content with the ETag alone.
func written(e, stored Entity) Entity {
	e.ETag, e.Timestamp = stored.ETag, stored.Timestamp
	return e
}

func (t *table) Get(ctx context.Context, partitionKey, rowKey string) (Entity, error) {
	if err := ValidateAddress(partitionKey, rowKey); err != nil {
		return Entity{}, err
	}
	return t.engine.Get(ctx, partitionKey, rowKey)
}

func (t *table) Delete(ctx context.Context, partitionKey, rowKey, ifMatch string) error {
	if err := ValidateAddress(partitionKey, rowKey); err != nil {
		return err
	}
	return t.engine.Delete(ctx, partitionKey, rowKey, ifMatch)
}

func (t *table) Query(ctx context.Context, q Query) (Page, error) {
	limit, matchable, err := checkQuery(q)
	if err != nil || !matchable {
		return Page{}, firstErr(err, ctx.Err())
	}
	q.Limit = limit
	return t.engine.Query(ctx, q)
}

func (t *table) Scan(ctx context.Context, s Scan) (Page, error) {
	limit, matchable, err := checkScan(s)
	if err != nil || !matchable {
		return Page{}, firstErr(err, ctx.Err())
	}
	s.Limit = limit
	return t.engine.Scan(ctx, s)
}

func (t *table) Batch(ctx context.Context, ops []Op) error {
	if err := ValidateBatch(ops); err != nil {
		return err
	}
	if len(ops) == 0 {
		return ctx.Err()
	}
	return t.engine.Batch(ctx, ops)
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
