package backup

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/metadatad/metadatad/store/pebble"
)

// restoreCommand names restores in the unfinished marker.
const restoreCommand = "restore"

// Restore checks the backup in from against its manifest and copies it into
// dataDir, which must be missing, empty, or left by a restore that did not
// finish (else ErrNotEmpty, and nothing is written). A backup of another
// format is ErrFormat; a file missing, truncated or changed is ErrDamaged
// naming it. The copy is then opened to check that it holds the manifest's
// tables.
//
// The unfinished marker (pebble.UnfinishedName) is written before the first
// file and removed after the check, so a restore cut short anywhere leaves a
// directory the store refuses to open, naming this restore's command line;
// Restore run again on it clears it and starts over. On any error dataDir
// is left as it was found: missing, empty, or holding only the marker.
func Restore(ctx context.Context, from, dataDir string) (*Manifest, error) {
	m, err := ReadManifest(from)
	if err != nil {
		return nil, err
	}
	made, redo, err := restoreTarget(dataDir)
	if err != nil {
		return nil, err
	}
	w := newWriter(dataDir, *m, made, false)
	err = pebble.MarkUnfinished(dataDir, pebble.Unfinished{Command: restoreCommand, Args: rerunArgs(from, dataDir)})
	if err == nil {
		err = copyFiles(ctx, w, from, m.Files)
	}
	if err == nil {
		err = w.Close()
	}
	if err == nil {
		err = checkTables(dataDir, m.Tables)
	}
	if err == nil {
		err = pebble.MarkFinished(dataDir)
	}
	if err != nil {
		if redo {
			return nil, errors.Join(err, w.closeFile(), clearDir(dataDir, pebble.UnfinishedName))
		}
		return nil, errors.Join(err, w.Abort())
	}
	return m, nil
}

// restoreTarget makes sure dir exists and holds nothing but what an
// unfinished restore left, which it removes but for the marker. made says
// it created dir; redo that it held an unfinished restore.
func restoreTarget(dir string) (made, redo bool, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) == 0 {
		made, err = emptyDir(dir)
		return made, false, err
	}
	u, found, err := pebble.ReadUnfinished(dir)
	if err != nil {
		return false, false, err
	}
	// A marker cut short while it was written is the restore's when it is
	// alone: a restore writes it before anything else.
	if !found || !(u.Command == restoreCommand || (u.Command == "" && len(entries) == 1)) {
		_, err := emptyDir(dir)
		return false, false, err
	}
	return false, true, clearDir(dir, pebble.UnfinishedName)
}

// rerunArgs is the command line of this restore, with absolute paths so the
// refusal that quotes it holds wherever it is run from.
func rerunArgs(from, dataDir string) []string {
	abs := func(p string) string {
		if a, err := filepath.Abs(p); err == nil {
			return a
		}
		return p
	}
	return []string{"metadatad", "restore", "-from", abs(from), "-data-dir", abs(dataDir)}
}

// checkTables opens the restored store and compares its tables with the
// manifest's: files that match their checksums but do not make the store
// the manifest describes are refused too.
func checkTables(dir string, want []string) error {
	got, err := pebble.Tables(dir)
	if err != nil {
		return fmt.Errorf("%w: the restored files do not open: %v", ErrDamaged, err)
	}
	if !slices.Equal(got, want) {
		return fmt.Errorf("%w: the restored store holds tables %v, the manifest says %v", ErrDamaged, got, want)
	}
	return nil
}
