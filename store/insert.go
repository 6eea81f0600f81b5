package store

import "context"

// ResolveInsert tells a retried insert from a conflicting one, once an
// insert of e into t failed with ErrAlreadyExists: it returns the stored
// entity when its properties equal e's, so that repeating an insert
// succeeds, and ErrAlreadyExists when they differ.
func ResolveInsert(ctx context.Context, t Table, e Entity) (Entity, error) {
	stored, err := t.Get(ctx, e.PartitionKey, e.RowKey)
	if err != nil {
		return Entity{}, err
	}
	if !EqualProperties(stored.Properties, e.Properties) {
		return Entity{}, ErrAlreadyExists
	}
	return stored, nil
}
