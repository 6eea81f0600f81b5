package store

import (
	"errors"
	"fmt"
)

// Sentinel errors of the contract. Backends wrap them with %w; callers test
// them with errors.Is.
var (
	// ErrNotFound reports a missing entity.
	ErrNotFound = errors.New("store: not found")
	// ErrAlreadyExists reports an insert of a key that is already taken.
	ErrAlreadyExists = errors.New("store: already exists")
	// ErrConflict reports a write whose ETag condition no longer holds.
	ErrConflict = errors.New("store: conflict")
	// ErrInvalidKey reports a partition key, row key or table name that breaks the key rules.
	ErrInvalidKey = errors.New("store: invalid key")
	// ErrInvalidEntity reports an entity whose properties break the entity rules.
	ErrInvalidEntity = errors.New("store: invalid entity")
	// ErrTooLarge reports an entity or batch over the size limits.
	ErrTooLarge = errors.New("store: too large")
	// ErrInvalidBatch reports a batch that breaks the batch rules.
	ErrInvalidBatch = errors.New("store: invalid batch")
	// ErrInvalidQuery reports a query or scan with an invalid limit, bound,
	// cursor or condition.
	ErrInvalidQuery = errors.New("store: invalid query")
	// ErrInsufficientStorage reports a write refused because the store is
	// nearly out of space; it succeeds once space is freed.
	ErrInsufficientStorage = errors.New("store: insufficient storage")
	// ErrCorrupt reports stored data that the backend finds damaged: the
	// operation cannot be served, others may still be.
	ErrCorrupt = errors.New("store: data damaged")
)

// BatchError reports which operation of a batch failed. The whole batch was
// rejected: no operation of it was applied.
type BatchError struct {
	// Index is the position of the failed operation in the batch.
	Index int
	// Err is why it failed.
	Err error
}

func (e *BatchError) Error() string { return fmt.Sprintf("operation %d: %v", e.Index, e.Err) }

func (e *BatchError) Unwrap() error { return e.Err }

// PropertyError names the property that broke the entity rules.
type PropertyError struct {
	// Property is the property name; empty when the entity as a whole is at fault.
	Property string
	// Err is why, wrapping ErrInvalidEntity or ErrTooLarge.
	Err error
}

func (e *PropertyError) Error() string {
	if e.Property == "" {
		return e.Err.Error()
	}
	return fmt.Sprintf("property %s: %v", e.Property, e.Err)
}

func (e *PropertyError) Unwrap() error { return e.Err }
