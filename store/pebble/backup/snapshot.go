package backup

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/metadatad/metadatad/store/pebble"
)

// Checkpointer is the store a backup copies; *pebble.DB is one.
type Checkpointer interface {
	// Checkpoint writes a consistent copy of the store, holding every write
	// acknowledged before the call, into dir, which must not exist.
	Checkpoint(dir string) error
}

// scratchName is the directory, inside the data directory, that holds the
// snapshot being taken: on the store's own filesystem, so that the
// checkpoint links the table files instead of copying them. Pebble ignores
// a directory it did not make.
const scratchName = "backup-scratch"

// RemoveStaleScratch removes the scratch directory of dataDir, which only
// a process killed while it sent a backup leaves behind: its links keep the
// disk space of files compactions have since replaced. Call it once the
// store is open (so no other process can be taking a backup of it) and
// before any backup starts. removed says there was one.
func RemoveStaleScratch(dataDir string) (removed bool, err error) {
	scratch := filepath.Join(dataDir, scratchName)
	if _, err := os.Lstat(scratch); errors.Is(err, os.ErrNotExist) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	return true, os.RemoveAll(scratch)
}

// Source takes snapshots of one open store, one at a time.
type Source struct {
	db      Checkpointer
	scratch string
	now     func() time.Time
	// busy is held from Take until the snapshot is removed.
	busy sync.Mutex
}

// NewSource returns a source of snapshots of db, whose files are in dataDir.
// now stamps the manifests; nil means time.Now.
func NewSource(db Checkpointer, dataDir string, now func() time.Time) *Source {
	if now == nil {
		now = time.Now
	}
	return &Source{db: db, scratch: filepath.Join(dataDir, scratchName), now: now}
}

// Take checkpoints the store and hashes the checkpoint's files. Every write
// acknowledged before Take was called is in the snapshot. Until the snapshot
// is removed, another Take fails with ErrBusy; meanwhile its linked files
// keep the disk space compactions would free, so remove it soon.
func (s *Source) Take(ctx context.Context) (*Snapshot, error) {
	if !s.busy.TryLock() {
		return nil, ErrBusy
	}
	snap, err := s.take(ctx)
	if err != nil {
		err = errors.Join(err, os.RemoveAll(s.scratch))
		s.busy.Unlock()
		return nil, err
	}
	return snap, nil
}

func (s *Source) take(ctx context.Context) (*Snapshot, error) {
	// What a crashed process left here is of no use: start afresh.
	if err := os.RemoveAll(s.scratch); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(s.scratch, 0o700); err != nil {
		return nil, err
	}
	dir := filepath.Join(s.scratch, "checkpoint")
	created := s.now().UTC()
	if err := s.db.Checkpoint(dir); err != nil {
		return nil, err
	}
	m, err := describe(ctx, dir, created)
	if err != nil {
		return nil, err
	}
	return &Snapshot{Dir: dir, Manifest: *m, release: func() error {
		defer s.busy.Unlock()
		return os.RemoveAll(s.scratch)
	}}, nil
}

// describe makes the manifest of the checkpoint in dir: its files with
// their sizes and hashes, and its tables.
func describe(ctx context.Context, dir string, created time.Time) (*Manifest, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	m := &Manifest{FormatVersion: FormatVersion, Engine: EnginePebble, Created: created}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			return nil, fmt.Errorf("backup: the checkpoint holds %s, which is not a regular file", e.Name())
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		f, err := hashFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		m.Files = append(m.Files, f)
	}
	// Listed after hashing: the read-only open may add a lock file, which is
	// not part of the backup.
	if m.Tables, err = pebble.Tables(dir); err != nil {
		return nil, err
	}
	return m, nil
}

func hashFile(path string) (File, error) {
	f, err := os.Open(path)
	if err != nil {
		return File{}, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return File{}, err
	}
	return File{Name: filepath.Base(path), Size: n, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

// Snapshot is a checkpoint of the store on disk, with its manifest.
type Snapshot struct {
	// Dir holds the checkpoint's files.
	Dir string
	// Manifest describes them.
	Manifest Manifest

	release func() error
	once    sync.Once
	err     error
}

// Open opens one of the snapshot's files.
func (s *Snapshot) Open(f File) (*os.File, error) { return os.Open(filepath.Join(s.Dir, f.Name)) }

// Remove deletes the snapshot's files and lets the next Take run. It may be
// called more than once.
func (s *Snapshot) Remove() error {
	s.once.Do(func() { s.err = s.release() })
	return s.err
}

// chunkSize is how much of a file one read or one streamed message carries.
const chunkSize = 1 << 20

// WriteTo writes the snapshot as a backup into dir, which must be missing
// or empty, checking every file on the way; the manifest goes last.
func (s *Snapshot) WriteTo(ctx context.Context, dir string) error {
	w, err := NewWriter(dir, s.Manifest, true)
	if err != nil {
		return err
	}
	if err := copyFiles(ctx, w, s.Dir, s.Manifest.Files); err != nil {
		return errors.Join(err, w.Abort())
	}
	if err := w.Close(); err != nil {
		return errors.Join(err, w.Abort())
	}
	return nil
}

// copyFiles feeds the files, read from dir, to w in chunks.
func copyFiles(ctx context.Context, w *Writer, dir string, files []File) error {
	buf := make([]byte, chunkSize)
	for _, file := range files {
		f, err := os.Open(filepath.Join(dir, file.Name))
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%w: file %s is missing from %s: the backup is incomplete", ErrDamaged, file.Name, dir)
		}
		if err != nil {
			return err
		}
		err = copyFile(ctx, w, file.Name, f, buf)
		f.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

func copyFile(ctx context.Context, w *Writer, name string, r io.Reader, buf []byte) error {
	var offset int64
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, err := r.Read(buf)
		if n > 0 {
			if werr := w.Write(name, offset, buf[:n]); werr != nil {
				return werr
			}
			offset += int64(n)
		}
		if errors.Is(err, io.EOF) {
			if offset == 0 { // an empty file is announced all the same
				return w.Write(name, 0, nil)
			}
			return nil
		}
		if err != nil {
			return err
		}
	}
}
