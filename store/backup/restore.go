package backup

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/metadatad/metadatad/store/pebble"
)

// Restore checks the backup in from against its manifest and copies it into
// dataDir, which must be missing or empty (else ErrNotEmpty, and nothing is
// written). A backup of another format is ErrFormat; a file missing,
// truncated or changed is ErrDamaged naming it. The copy is then opened to
// check that it holds the manifest's tables. On any error dataDir is left
// as it was found.
func Restore(ctx context.Context, from, dataDir string) (*Manifest, error) {
	m, err := ReadManifest(from)
	if err != nil {
		return nil, err
	}
	w, err := NewWriter(dataDir, *m, false)
	if err != nil {
		return nil, err
	}
	err = copyFiles(ctx, w, from, m.Files)
	if err == nil {
		err = w.Close()
	}
	if err == nil {
		err = checkTables(dataDir, m.Tables)
	}
	if err != nil {
		return nil, errors.Join(err, w.Abort())
	}
	return m, nil
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
