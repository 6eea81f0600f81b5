// Package acquisition keeps the run history of image acquisition
// orchestrations and answers the control plane's question "which
// acquisitions are pending or running now?", the .NET system's
// GetCurrentOrchestrationStatus.
//
// Two tables:
//
//   - the instance table (ImageAcquisitionInstance by default, the .NET
//     system's ImageAcquisitionInstanceTableName): PartitionKey the instance
//     id, RowKey the constant InstanceRowKey. One row per instance, replaced
//     by every record of it; the only truth.
//   - the active table (ActiveTable of the instance table): PartitionKey the
//     UTC minute of the instance's last update as yyyyMMddHHmm (the image
//     retention index's format), RowKey the instance id. One row per
//     instance that is pending or running, except durable-entity instances
//     (ids starting with EntityPrefix), which never end and are never
//     acquisitions; their rows are never written, so they are never listed.
//
// Listing the instances active within a window is then one range scan over
// the minute partitions from the window's start: its cost follows the
// instances updated within the window, not the run history, which grows
// with every run of every device. Filtering the instance table on status
// and time instead would read the whole history on every call.
//
// The price is a second table to keep in step without transactions (Azure
// Table Storage has none across partitions): a record writes the instance's
// new active row first, then the instance row, conditional on the ETag read
// before, then removes the active row it superseded, conditional on the
// ETag it had when read. An active instance therefore always has its active
// row, but a crash or a lost race can leave an active row that no longer
// matches its instance (an old minute, or a status since ended). Listing
// checks every active row it finds against its instance row, one point read
// each, and skips those that do not match, so a stale row is never listed;
// stale rows are left in their minute partitions, which later windows never
// reach.
package acquisition
