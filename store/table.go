package store

import (
	"context"
	"time"
)

// Limits of the contract, those of Azure Table Storage.
const (
	// MaxKeyBytes bounds a partition key or row key, counted as Azure does:
	// in UTF-16, so 512 characters of the Basic Multilingual Plane.
	MaxKeyBytes = 1024
	// MaxBatchOps bounds the operations of one batch.
	MaxBatchOps = 100
	// MaxBatchBytes bounds the payload of one batch.
	MaxBatchBytes = 4 << 20
	// MaxEntityBytes bounds one entity, keys and properties included.
	MaxEntityBytes = 1 << 20
	// MaxPageSize bounds the entities of one query page.
	MaxPageSize = 1000
	// MaxProperties bounds the custom properties of one entity.
	MaxProperties = 252
	// MaxValueBytes bounds one string (as UTF-16) or binary property value.
	MaxValueBytes = 64 << 10
)

// Properties are an entity's typed values. A value is one of string, bool,
// int32, int64, float64, time.Time or []byte: the types Azure Table Storage
// keeps (Edm.String, Edm.Boolean, Edm.Int32, Edm.Int64, Edm.Double,
// Edm.DateTime, Edm.Binary), so a .NET reader sees the same types.
type Properties map[string]any

// Entity is one row of a table.
type Entity struct {
	PartitionKey string
	RowKey       string
	Properties   Properties
	// ETag identifies the stored version. Backends set it on every read and
	// write; callers pass it back for optimistic concurrency.
	ETag string
	// Timestamp is when the backend last wrote the entity; set by the backend.
	Timestamp time.Time
}

// Range bounds keys to [From, To). An empty From starts at the first key and
// an empty To runs to the last; a bound that is not empty must be a valid
// key (ErrInvalidQuery otherwise).
type Range struct {
	From, To string
}

// Cursor is the position where a query resumes: the entity at or after
// (PartitionKey, RowKey). It is a position, not an entity: it need not name
// an entity that exists, and only its backend's pages produce one.
type Cursor struct {
	PartitionKey, RowKey string
}

// Equal is a condition that a property holds a value, tested with the
// property's type (an int32 never equals an int64). A condition on a name
// no property can have, or with a value of a type no property holds, is
// refused with ErrInvalidQuery; a value of a stored type that no entity can
// hold (a NaN, a time between 100 ns ticks) meets nothing.
type Equal struct {
	Property string
	Value    any
}

// Query reads one partition in row-key order.
type Query struct {
	PartitionKey string
	// Rows bounds the row keys.
	Rows Range
	// Where keeps only the entities that meet every condition.
	Where []Equal
	// Limit caps the entities of the page: 1 to MaxPageSize; 0 means MaxPageSize.
	Limit int
	// Resume continues a previous page of the same query; nil starts at the beginning.
	Resume *Cursor
}

// Scan reads a range of partitions in (PartitionKey, RowKey) order.
type Scan struct {
	// Partitions bounds the partition keys.
	Partitions Range
	// Where keeps only the entities that meet every condition.
	Where []Equal
	// Select, when not nil, names the properties the page's entities carry:
	// the others are left unread (Azure's $select), so a scan that needs
	// keys alone, or a few small properties, does not pay for whole rows.
	// An empty, non-nil Select reads keys, ETag and Timestamp only. Where
	// may name only selected properties; a selected name an entity lacks
	// is simply missing from it.
	Select []string
	// Limit caps the entities of the page: 1 to MaxPageSize; 0 means MaxPageSize.
	Limit int
	// Resume continues a previous page of the same scan; nil starts at the beginning.
	Resume *Cursor
}

// Page is one page of a query or scan.
type Page struct {
	// Entities in key order. A page may hold fewer than the limit, even none,
	// while more remain.
	Entities []Entity
	// Next resumes after this page; nil when nothing remains.
	Next *Cursor
}

// WriteMode says what a write does to an existing entity's properties.
type WriteMode int

const (
	// Merge keeps the stored properties that the write does not name.
	Merge WriteMode = iota
	// Replace drops the stored properties that the write does not name.
	Replace
)

// OpKind is the kind of one batch operation.
type OpKind int

const (
	// OpInsert adds an entity; it fails with ErrAlreadyExists if the key is taken.
	OpInsert OpKind = iota
	// OpUpsert adds the entity or writes over the existing one, per Mode.
	OpUpsert
	// OpUpdate writes over an existing entity, per Mode; ErrNotFound if missing.
	OpUpdate
	// OpDelete removes an entity; it fails with ErrNotFound if missing.
	OpDelete
)

// Op is one operation of a batch.
type Op struct {
	Kind OpKind
	// Entity is the entity to write; for OpDelete only its keys count.
	Entity Entity
	// Mode applies to OpUpsert and OpUpdate.
	Mode WriteMode
	// IfMatch, for OpUpdate and OpDelete, is the ETag the stored entity must
	// have, or empty for any.
	IfMatch string
}

// Table is one table of a backend. Every method is safe for concurrent use.
// Every write is durable when it returns: it survives a crash of the process
// or the machine.
type Table interface {
	// Name is the table's name.
	Name() string
	// Insert adds e. It fails with ErrAlreadyExists if e's key is taken.
	// Insert, Upsert and Update return e as written, stamped with its new
	// ETag and Timestamp: after a Merge, the properties e named, not the
	// merged set, which only a Get reads (Azure answers a merge with the
	// ETag alone).
	Insert(ctx context.Context, e Entity) (Entity, error)
	// Upsert adds e or writes over the existing entity per mode.
	Upsert(ctx context.Context, e Entity, mode WriteMode) (Entity, error)
	// Update writes over the existing entity per mode. It fails with
	// ErrNotFound if there is none and with ErrConflict if ifMatch is set and
	// differs from the stored ETag.
	Update(ctx context.Context, e Entity, mode WriteMode, ifMatch string) (Entity, error)
	// Get reads one entity; ErrNotFound if missing.
	Get(ctx context.Context, partitionKey, rowKey string) (Entity, error)
	// Delete removes one entity. It fails with ErrNotFound if missing and with
	// ErrConflict if ifMatch is set and differs from the stored ETag.
	Delete(ctx context.Context, partitionKey, rowKey, ifMatch string) error
	// Query reads one partition in row-key order, one page at a time.
	Query(ctx context.Context, q Query) (Page, error)
	// Scan reads a range of partitions in key order, one page at a time.
	Scan(ctx context.Context, s Scan) (Page, error)
	// Batch applies up to MaxBatchOps operations on distinct rows of one
	// partition, all or none. A failed operation is reported as a
	// *BatchError; an empty batch does nothing.
	Batch(ctx context.Context, ops []Op) error
}

// Backend opens tables.
type Backend interface {
	// Table returns the named table, creating it if it does not exist.
	// Table names are 3 to 63 letters and digits, starting with a letter,
	// and case-insensitive as in Azure: "Images" and "images" are one table.
	Table(ctx context.Context, name string) (Table, error)
}

// TableOp is one operation of a transaction over several tables.
type TableOp struct {
	Table Table
	Op    Op
}

// Transactor is implemented by backends that commit operations on several
// tables and partitions atomically. Callers find it by type assertion on the
// Backend and fall back to ordered single-table writes without it.
type Transactor interface {
	// Transact applies up to MaxBatchOps operations on distinct rows, all or
	// none, with the rules and errors of Table.Batch but no partition rule.
	// Every table must come from this backend.
	Transact(ctx context.Context, ops []TableOp) error
}

// Counter is implemented by tables that count the rows of a partition's
// row-key range without reading the rows themselves.
type Counter interface {
	// CountRows counts the entities of the partition whose row key lies in rows.
	CountRows(ctx context.Context, partitionKey string, rows Range) (int64, error)
}

// Key addresses one entity.
type Key struct {
	PartitionKey, RowKey string
}
