// Package embedded is the retention engine's driver for the embedded store
// (store/pebble, a store.Purger): it purges with the engine's own tools,
// an LSM's range deletions and atomic batches, where the queue design of
// package retention pays per row. New is its retention.NewDriver.
//
// The store is a store.Purger: it tallies every primary row, per camera,
// UTC day and minute, in the batch that writes the row, so a tally always
// equals the rows it counts. A purge
//
//  1. surveys the tallies of the expired days (never the rows) for the
//     cameras with expired rows and, with policies, each one's boundary;
//     where every camera has the job's boundary (no policies, holds,
//     outbox, dry run or row cap) it reads their keys alone
//     (store.Purger.TalliedPartitions): the sections decode them;
//  2. deletes in sections of retention.Options.SectionCameras cameras: each section
//     is one exclusive batch (no write it may touch runs meanwhile) that
//     reads its cameras' tallies, deletes each one's expired rows with one
//     range deletion (a camera with a few rows a day, one by one: the store
//     decides, as a range deletion in the memtable costs every read after
//     it), trims the tallies and writes the job's record with
//     the counts. The counts are exact by construction: a section is in the
//     store with its counts or not at all. Exclusivity makes a late old
//     image wholly before a section (deleted, counted) or wholly after it
//     (both rows kept). Only writes of rows up to the purge's cutoff day
//     (and of other tables) wait, for one section at most: a camera's new
//     images pass (store/pebble's gate.go);
//  3. deletes the expired minutes of the index by one range deletion, in
//     the last section, which covers every camera: it first deletes what the
//     earlier sections' cameras got since, so no index row of a kept row goes
//     and no primary row is left without its index row. The store records
//     which cameras were written in the expired days since the sections
//     began (store.Purger.WatchLate), and the last section reads those
//     again, not every camera: on a live store, almost none. The index rows that
//     deletion takes are counted when it commits, not before.
//
// With policies a kept camera (held, spared, on a longer retention) may have
// rows in the expired minutes: the range deletion stops at the oldest minute
// a kept camera has, and the index rows of the purged rows after it go by
// their derived keys (images.Repository.IndexKeys) in their section's batch.
// A policy's thinning tiers (package policy) ride the same sections: a day
// whose tally shows an interval with more than one row has that interval's
// rows but its keeper deleted by range (store.PurgeBatch.ThinRows), their
// index rows by derived key, in the section's batch with the counts: one
// key per row where the index never held the fleet's key form
// (store.PurgeBatch.InstantFirst), both forms otherwise.
// With Options.Outbox each section also records every image it deletes in
// the same batch (outbox.go), so the blob side hears of each deletion once.
// While requests are served (retention.Options.Live) a purge is paced by
// time, not rows (pace.go): sections of about Options.SectionTime, or of
// what is left of Options.LiveBurst if more, sized from the time per unit
// of work the sections before took; the burst's work back to back, then
// each section followed by a rest
// that keeps the purge's share of the time to Options.LiveShare; on an
// idle store the sections run back to back. A
// section commits without a sync of its own (store.PurgeBatch.Unsynced):
// a crash that loses it loses a section not yet run. Sections that write
// outbox records, which the blob side may act on at once, and the last,
// which ends the job, are synced; and since the store shows a write before
// its sync ends, a read of the outbox that finds the records of a section
// still committing waits for it to return (outbox.go).
// A purge cut short resumes from its record; one cancelled or failed after
// some sections (or whose kept cameras changed since the survey) ends with
// an orphans pass (orphans.go) that deletes the index rows whose primary
// rows went, in exclusive batches that count them with the job, so every
// ending reports exactly what it deleted. A store from before the tallies
// waits for their backfill.
//
// The index rows a purge deletes are counted as its primary rows: every
// create writes one of each in one batch, and a row's index partition is
// its capture minute. (An index row with no primary row, which only a copy
// from Azure can bring, goes with the range deletion uncounted.)
//
// A storage budget (Budgeter) keeps the store's live data under a number
// of bytes: it measures with Pebble's own accounting (store.Sizer) and,
// past the bytes, finds the oldest images from the tallies and starts a
// purge of them through the engine's public API, sparing held cameras and
// images younger than the floor. It lives here because only this store
// can measure itself and has tallies to find the oldest rows by.
//
// Files: embedded.go (the driver, a kind's run, the survey, the sections'
// sizes), pace.go (the live pace), section.go (one exclusive section and
// the last one's range deletion of the index),
// orphans.go (the orphans pass), outbox.go (the outbox of deleted images,
// written in the sections' batches and read by sequence), delete.go (one
// image deleted on purpose, in one transaction), budget.go (the storage
// budget).
package embedded
