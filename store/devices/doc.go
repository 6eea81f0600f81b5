// Package devices keeps each device's acquisition orchestration state, the
// .NET system's DurableEntityData: the status and rate of the single, pano,
// leased and turbo capture modes, when leased and turbo mode end, the
// current config, and when the state last changed.
//
// One row per device in one table (DurableEntityData by default, the .NET
// system's DurableEntityTableName): PartitionKey the device id, RowKey the
// constant StateRowKey. Reading a device is a point read, and listing every
// device is one scan in device order; there is no query across devices to
// optimise for.
//
// Updates merge: only the named fields change, and properties this package
// does not know, which the .NET system may have written, are kept. The
// merge happens here rather than with the store's Merge mode, which cannot
// clear a property, and every write is conditional on the ETag of the row
// it merged into, so two concurrent updates of different fields never lose
// each other's change.
package devices
