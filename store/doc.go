// Package store is the table contract every storage backend implements.
//
// The contract follows Azure Table Storage, the scale-out backend, so that the
// embedded backend cannot accept anything Azure would refuse: entities live in
// partitions, are addressed by (PartitionKey, RowKey), come back in key order,
// and are written in batches of at most 100 operations inside one partition.
// Key rules, entity limits, batch rules, page limits, bounds, cursors and
// conditions are checked here, once, by the portable layer: an engine is a
// Driver, and its constructor hands out only NewBackend over it, so no
// caller reaches an engine with unchecked input and every engine refuses
// the same input with the same error (in the manner of go-cloud's portable
// types over drivers).
//
// The package also holds the key codecs shared with the existing .NET system:
// inverted .NET ticks for newest-first row keys and minute buckets for the
// retention index.
package store
