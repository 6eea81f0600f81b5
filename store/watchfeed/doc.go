// Package watchfeed delivers new image metadata to the watchers of its cameras as
// it is created: the machinery behind the image services' Watch RPCs.
//
// A Feed serves one image kind. New images reach it one of two ways:
//
//   - Publish, called after each successful create, where one process owns
//     the store (the embedded Pebble store): every create passes through it.
//   - A tail (Options.Poll), where several replicas share the store (Azure)
//     and a create may land on any of them. The tail knows only the cameras
//     this replica's subscriptions watch: with none it reads nothing. A
//     Subscribe that starts watching a camera first reads the camera's
//     images within Window of now from its primary partition; those existed
//     before the subscription and are never fed to it. Every Poll the tail
//     then finds the images of the watched cameras it has not seen, and
//     feeds them.
//
// The tail finds them one of two ways, whichever costs fewer requests. The
// primary table is partitioned by camera with newest-first row keys, so one
// range query of a camera's partition reads its images within the window;
// the index table is partitioned by capture minute (IndexShards partitions
// a minute), so one scan of the window's partitions, keys only, finds every
// camera's rows, and a read of the primary row of each new one of a watched
// camera follows. Azure bills and paces by request, and a read costs at
// least one request per partition it touches: the queries cost one per
// watched camera and read only their rows; the scan costs at least one per
// index partition and reads the whole fleet's keys. So a tail queries its
// cameras while they are no more than the window's index partitions
// (IndexShards for each of its minutes: 11 for a 5-minute Window), and
// scans the index beyond. A create writes its
// index row first: a scan looks again for a primary row not there yet at
// the next passes, for up to the repository's IndexLag. Either way an
// image whose primary row lands after a watch of its camera began reaches
// that watch: it was not there when the watch read the camera, so a pass
// after it landed feeds it.
//
// The tail reads the store outside the feed's lock and feeds what it read
// under it; a pass that read a camera whose watch ended, and which was
// watched anew meanwhile, feeds that camera nothing: the new watch read for
// itself what existed.
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
// or after a given one: those captured from that Stamp less Window and
// ClockSkew on. It reads the caller's cameras' primary partitions over that
// range, so a resume costs what its cameras hold, and the Stamp's age is
// bounded (Options.MaxResumeAge); it scans the index instead only when the
// range has fewer index partitions than the caller has cameras and the
// Stamp is recent (within Window and ClockSkew), when it reads no more of
// the fleet than a few tail passes. A watcher that resumes with Since from
// the Stamp of the last event it handled, after subscribing again,
// therefore misses nothing: an image delivered after that event either had
// a Stamp at or after it, or was published after the new subscription
// began.
package watchfeed
