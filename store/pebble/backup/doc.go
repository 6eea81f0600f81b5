// Package backup copies the embedded store while it serves, and restores
// such a copy into a new data directory.
//
// A backup is a directory: the files of a Pebble checkpoint (a consistent
// point-in-time copy, taken without stopping writes for more than an
// instant) and a manifest, ManifestName, listing the format version, the
// tables that hold rows, and each file's size and SHA-256. The manifest is
// written last, so a directory without one is not a backup. Restore checks
// every file against the manifest before the store is opened, and refuses a
// directory that already holds anything but an unfinished restore.
//
// A restore writes the marker pebble.UnfinishedName, with its own command
// line, into the data directory before the first file and removes it after
// the last check; until then the store refuses to open the directory and
// says to run that restore again, which clears it and starts over. A
// marker, not a directory renamed into place at the end: the target may be
// an empty directory that is a mount point of its own, which no rename can
// replace, and `metadatad copy -to embedded:DIR` resumes in place in a
// store it opens, which the same marker covers.
//
// A server killed while it sent a backup leaves its scratch directory
// (links to the store's files, holding their space); RemoveStaleScratch,
// called when the server starts, removes it.
//
// A restored store is the store as it was at the backup's instant, as after
// a crash at that instant: every acknowledged write is there, and purge jobs
// that were running resume at the next start from the progress they had
// recorded (one whose start had not been confirmed ends failed without
// deleting anything), exactly as they do after a crash.
package backup
