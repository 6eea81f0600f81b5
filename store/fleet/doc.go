// Package fleet answers questions about every camera of an image type at
// once: which cameras there are, with their first and latest image (the
// inventory); which stopped sending images (silent cameras); which spans
// of one camera's time hold no image (coverage); and what the whole fleet
// captured in a window (the fleet at a moment). Each question has a cost
// that follows what it asks, never the history of the fleet.
//
// The two backends answer the first three from different sources, behind
// one View:
//
//   - The embedded store finds a camera's newest and oldest image by
//     seeking to the two ends of its partition of the primary table
//     (pebble.DB.PartitionEnds: three seeks per camera, whatever its
//     history), so the inventory's first and latest captures are exact,
//     and counts images per day and finds gaps from the tallies it keeps
//     for retention (store.Purger.Tallies: per camera and UTC day, the
//     rows per capture minute), so coverage reads a tally per day, not a
//     row per image.
//   - Azure Table Storage can neither seek to a partition's end nor tally,
//     and listing a table's partitions means reading every row. There a
//     small table, <primary>Cameras, holds a row per camera with its first
//     and latest capture: a Recorder, told of every create through
//     images.Options.Created, writes it on a camera's first image in the
//     process and then at most once per interval per camera and replica.
//     The latest capture it shows may lag the newest image by up to one
//     interval (DefaultInterval); the first is the oldest image any
//     replica was asked to create since the table exists. Coverage reads
//     the keys alone of the camera's rows in the range (a $select of no
//     property).
//
// The fleet at a moment is a scan of the index table's minute partitions
// of the window on both. The embedded store's index rows carry their
// images (one transaction writes them with their primary rows), so that is
// all it reads; on Azure each index row costs a read of its primary row,
// and one whose primary row is missing (a create still under way, or one
// that gave up) is left out.
//
// Silence counts the silent cameras of each view in the background
// (RunOnce, Run), so that a metrics scrape reads a number and not the
// store.
package fleet
