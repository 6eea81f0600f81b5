// Package feed delivers new image metadata to the watchers of its cameras as
// it is created: the machinery behind the image services' Watch RPCs.
//
// A Feed serves one image kind. New images reach it one of two ways:
//
//   - Publish, called after each successful create, where one process owns
//     the store (the embedded Pebble store): every create passes through it.
//   - A tail (Options.Poll), where several replicas share the store (Azure)
//     and a create may land on any of them: every Poll, each replica scans
//     the index partitions of the minutes within Window of now (the index
//     table is partitioned by capture minute), remembers the index rows it
//     has seen, and reads the primary row of each new one of a watched
//     camera. A primary row not there yet (a create writes its index row
//     first) is looked for again at the next passes, for up to the
//     repository's IndexLag. The rows of cameras nobody watches are passed
//     over unread but kept for the IndexLag: a subscription reads their
//     primary rows before it begins, and one not there yet is looked for
//     as above, so an image whose primary row lands after a watch of its
//     camera began reaches that watch.
//
// Either way the feed fans new images out in-process to its subscriptions,
// each with its own bounded buffer: a publisher never waits for a
// subscriber, and a subscription whose buffer is full is dropped (Behind).
//
// What the feed holds: an image whose captured_at lies within Window of the
// moment it became readable (by the tail's pass, or Publish's call). Older
// captures (backlog uploads) and captures further ahead are left out. Every
// event carries a Stamp, non-decreasing in the order of the events; Since
// reads back every image that the feed can have delivered with a Stamp at
// or after a given one, from the index partitions of the minutes from that
// Stamp less Window and ClockSkew onwards. A watcher that resumes with
// Since from the Stamp of the last event it handled, after subscribing
// again, therefore misses nothing: an image delivered after that event
// either had a Stamp at or after it, or was published after the new
// subscription began.
package feed
