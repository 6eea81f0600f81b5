package backup

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"os"
	"path/filepath"
)

// Writer writes the files of a backup into a directory as they arrive, in
// the manifest's order, checking each one's size and SHA-256 against the
// manifest. Nothing it writes is trusted before Close returns nil; Abort
// removes it.
type Writer struct {
	dir string
	m   Manifest
	// made says NewWriter created dir, so Abort removes it, not only its content.
	made         bool
	withManifest bool

	idx  int // index in m.Files of the open file, cur
	next int // index in m.Files of the first file not started
	cur  *os.File
	h    hash.Hash
	n    int64
}

// NewWriter starts writing the files m lists into dir, which it creates if
// missing and refuses with ErrNotEmpty if it holds anything. withManifest
// writes the manifest at Close, making dir a backup; without it, dir holds
// only the store's files, as a restored data directory does.
func NewWriter(dir string, m Manifest, withManifest bool) (*Writer, error) {
	if err := m.check(); err != nil {
		return nil, err
	}
	made, err := emptyDir(dir)
	if err != nil {
		return nil, err
	}
	return newWriter(dir, m, made, withManifest), nil
}

// newWriter writes into dir, which the caller has checked; made says the
// caller created it.
func newWriter(dir string, m Manifest, made, withManifest bool) *Writer {
	return &Writer{dir: dir, m: m, made: made, withManifest: withManifest}
}

// emptyDir makes sure dir exists and is empty; made says it was created.
func emptyDir(dir string) (made bool, err error) {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return true, os.MkdirAll(dir, 0o750)
	case err != nil:
		return false, err
	case len(entries) > 0:
		return false, fmt.Errorf("%w: %s holds %d entries (%s, ...); give a new or empty directory", ErrNotEmpty, dir, len(entries), entries[0].Name())
	}
	return false, nil
}

// Write appends data to the file name, at offset within it. Files arrive
// whole, one after the other, in the manifest's order; an empty file may be
// announced with no data, or skipped.
func (w *Writer) Write(name string, offset int64, data []byte) error {
	if w.cur == nil || name != w.m.Files[w.idx].Name {
		if err := w.advance(name); err != nil {
			return err
		}
	}
	want := w.m.Files[w.idx]
	if offset != w.n {
		return fmt.Errorf("%w: file %s: data at offset %d after %d bytes", ErrDamaged, name, offset, w.n)
	}
	if w.n+int64(len(data)) > want.Size {
		return fmt.Errorf("%w: file %s is longer than the %d bytes the manifest says", ErrDamaged, name, want.Size)
	}
	if _, err := w.cur.Write(data); err != nil {
		return err
	}
	w.h.Write(data)
	w.n += int64(len(data))
	return nil
}

// advance finishes the current file and opens the file name, which must
// come next; files between them must be empty.
func (w *Writer) advance(name string) error {
	if err := w.finish(); err != nil {
		return err
	}
	for w.next < len(w.m.Files) {
		if w.m.Files[w.next].Name == name {
			return w.open(w.next)
		}
		if err := w.skipEmpty(); err != nil {
			return err
		}
	}
	return fmt.Errorf("%w: file %s is not in the manifest, or out of order", ErrDamaged, name)
}

// skipEmpty writes the next file, which must be empty since no data came.
func (w *Writer) skipEmpty() error {
	f := w.m.Files[w.next]
	if f.Size != 0 {
		return fmt.Errorf("%w: file %s is missing: the backup is incomplete", ErrDamaged, f.Name)
	}
	if err := w.open(w.next); err != nil {
		return err
	}
	return w.finish()
}

// open creates file i of the manifest.
func (w *Writer) open(i int) error {
	f, err := os.OpenFile(filepath.Join(w.dir, w.m.Files[i].Name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o640)
	if err != nil {
		return err
	}
	w.cur, w.h, w.n, w.idx, w.next = f, sha256.New(), 0, i, i+1
	return nil
}

// finish checks, syncs and closes the current file, if any.
func (w *Writer) finish() error {
	if w.cur == nil {
		return nil
	}
	f, want := w.cur, w.m.Files[w.idx]
	w.cur = nil
	err := errors.Join(f.Sync(), f.Close())
	if err != nil {
		return err
	}
	if w.n != want.Size {
		return fmt.Errorf("%w: file %s has %d bytes, the manifest says %d: the backup is truncated or damaged", ErrDamaged, want.Name, w.n, want.Size)
	}
	if got := hex.EncodeToString(w.h.Sum(nil)); got != want.SHA256 {
		return fmt.Errorf("%w: file %s has SHA-256 %s, the manifest says %s: the backup is damaged", ErrDamaged, want.Name, got, want.SHA256)
	}
	return nil
}

// Close checks the last file and that no file is missing, writes the
// manifest (with withManifest) and syncs the directory. On an error, call
// Abort.
func (w *Writer) Close() error {
	if err := w.finish(); err != nil {
		return err
	}
	for w.next < len(w.m.Files) {
		if err := w.skipEmpty(); err != nil {
			return err
		}
	}
	if w.withManifest {
		b, err := json.MarshalIndent(w.m, "", "  ")
		if err != nil {
			return err
		}
		if err := writeSynced(filepath.Join(w.dir, ManifestName), append(b, '\n')); err != nil {
			return err
		}
	}
	return syncDir(w.dir)
}

// Abort removes what the writer wrote: the directory if it made it, else
// its content.
func (w *Writer) Abort() error {
	_ = w.closeFile() // unchecked: the file is removed below
	if w.made {
		return os.RemoveAll(w.dir)
	}
	return clearDir(w.dir, "")
}

// closeFile closes the file being written, if any, unchecked.
func (w *Writer) closeFile() error {
	if w.cur == nil {
		return nil
	}
	err := w.cur.Close()
	w.cur = nil
	return err
}

// clearDir removes everything in dir but the entry named keep.
func clearDir(dir, keep string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if e.Name() != keep {
			errs = append(errs, os.RemoveAll(filepath.Join(dir, e.Name())))
		}
	}
	return errors.Join(errs...)
}

func writeSynced(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o640)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	return errors.Join(err, f.Sync(), f.Close())
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}
