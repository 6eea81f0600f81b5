// Package store is the table contract every storage backend implements.
//
// The contract follows Azure Table Storage, the scale-out backend, so that the
// embedded backend cannot accept anything Azure would refuse: entities live in
// partitions, are addressed by (PartitionKey, RowKey), come back in key order,
// and are written in batches of at most 100 operations inside one partition.
// Key rules, entity limits and batch rules are checked here, once, by
// Validate* functions that every backend calls; backends never re-check
// differently.
//
// The package also holds the key codecs shared with the existing .NET system:
// inverted .NET ticks for newest-first row keys and minute buckets for the
// retention index.
package store
