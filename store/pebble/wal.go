package pebble

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"

	pebbledb "github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/wal"
)

// The write-ahead log lives in its own directory, walDirName, so that
// nothing takes its NNNNNN.log files for leftovers beside the tables: every
// acknowledged write not yet flushed is only there.
//
// Logs that an older build, or a checkpoint, left in the data directory
// itself are read from there too (Pebble's WALRecoveryDirs). That is the
// whole migration: the engine replays them at open, flushes what they hold
// into table files, records the flush in the MANIFEST and only then deletes
// them; its next log is made in walDirName. No file is moved, so a crash at
// any point leaves every log where the next open looks for it.
//
// Pebble opens a directory whose newest log has gone as if it had never
// been written, so the store records, in walFileName, the name of the
// newest log the engine has made. The engine reports a new log after the
// file and its directory entry are synced and before any write reaches it,
// and the record is synced before the report returns, so every
// acknowledged write is in the named log or an older one. A clean close
// adds the log's size. An open that finds the named log missing, or
// shorter than it was at a clean close, refuses: the newest writes are
// gone. What it cannot tell: a log cut short after a crash (no size is
// recorded, and a torn tail is how a crash mid-write looks), and the
// deletion of an older log whose writes were not flushed yet (only the
// newest is named; the engine flushes a log's writes soon after moving to
// the next). A truncated older log the engine refuses by itself: it must
// end cleanly.
const (
	walDirName  = "wal"
	walFileName = "METADATAD-WAL"
)

// walLayout has o keep the log in walDirName and read logs left in the data
// directory itself. Both paths are relative to the store, so the OPTIONS
// file stays true of a copy of the directory under another name.
func walLayout(o *pebbledb.Options, fs vfs.FS) {
	o.WALDir = pebbledb.MakeStoreRelativePath(fs, walDirName)
	o.WALRecoveryDirs = []wal.Dir{{FS: fs, Dirname: pebbledb.MakeStoreRelativePath(fs, "")}}
}

// readOnlyWALLayout is walLayout for a read-only open of dir, which cannot
// create walDirName. A checkpoint has none: its logs are copied beside its
// tables. An OPTIONS file naming walDirName would then stop the engine, for
// the logs it might hold; a directory that does not exist holds none.
func readOnlyWALLayout(o *pebbledb.Options, fs vfs.FS, dir string) {
	if _, err := fs.Stat(fs.PathJoin(dir, walDirName)); err == nil {
		walLayout(o, fs)
		return
	}
	o.Unsafe.AllowMissingWALDirs = true
}

// walRecord keeps walFileName for one open DB.
type walRecord struct {
	fs  vfs.FS
	dir string
	log *slog.Logger
	mu  sync.Mutex
	// newest is the name of the newest log the engine made in this run.
	newest string
}

func newWALRecord(opts Options) *walRecord {
	return &walRecord{fs: opts.FS, dir: opts.Dir, log: opts.Logger}
}

// created is Pebble's WALCreated listener. The engine waits for it before
// writing to the new log, so the record is durable before any write the log
// holds is acknowledged. One sync per log: a log holds a memtable's worth of
// writes.
func (r *walRecord) created(info pebbledb.WALCreateInfo) {
	if info.Err != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.newest = r.fs.PathBase(info.Path)
	if err := writeFileSynced(r.fs, r.dir, walFileName, r.newest+"\n"); err != nil {
		// The record keeps naming an older log; check accepts its absence
		// while a newer log is there.
		r.log.Warn("pebble: recording the newest write-ahead log", "file", r.fs.PathJoin(r.dir, walFileName), "err", err)
	}
}

// closed adds the newest log's size to the record, once the engine has
// closed it and no longer writes to it.
func (r *walRecord) closed() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.newest == "" {
		return nil
	}
	info, err := r.fs.Stat(r.fs.PathJoin(r.dir, walDirName, r.newest))
	if err != nil {
		return fmt.Errorf("pebble: the newest write-ahead log after close: %w", err)
	}
	return writeFileSynced(r.fs, r.dir, walFileName, r.newest+" "+strconv.FormatInt(info.Size(), 10)+"\n")
}

// check refuses a directory whose recorded newest log is missing or shorter
// than at the last clean close, then removes the record: the engine flushes
// the logs it replays and deletes them before it makes its next log, and a
// crash in between must not leave a record naming a log rightly gone. The
// engine's first new log is recorded again. The caller holds the
// directory's lock.
func (r *walRecord) check() error {
	name, size, err := r.read()
	if err != nil || name == "" {
		return err
	}
	logs, err := r.logs()
	if err != nil {
		return err
	}
	have, found := logs[name]
	switch {
	case !found && !newerLog(logs, name):
		return fmt.Errorf("%w: the write-ahead log %s, which holds the newest writes, is missing from %s (%s names it)",
			errDamaged, name, r.fs.PathJoin(r.dir, walDirName), walFileName)
	case found && size >= 0 && have < size:
		return fmt.Errorf("%w: the write-ahead log %s holds %d bytes, and held %d when the store was last closed",
			errDamaged, name, have, size)
	}
	return r.forget()
}

// forget removes the record, durably.
func (r *walRecord) forget() error {
	if err := r.fs.Remove(r.fs.PathJoin(r.dir, walFileName)); err != nil {
		return err
	}
	d, err := r.fs.OpenDir(r.dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

// read returns the recorded log's name and its size at a clean close (-1
// for none); no file is name "".
func (r *walRecord) read() (name string, size int64, err error) {
	f, err := r.fs.Open(r.fs.PathJoin(r.dir, walFileName))
	if errors.Is(err, os.ErrNotExist) {
		return "", -1, nil
	}
	if err != nil {
		return "", -1, fmt.Errorf("open %s: %w", walFileName, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 128))
	if err != nil {
		return "", -1, fmt.Errorf("read %s: %w", walFileName, err)
	}
	fields := strings.Fields(string(b))
	size = -1
	if len(fields) == 2 {
		size, err = strconv.ParseInt(fields[1], 10, 64)
	}
	if len(fields) < 1 || len(fields) > 2 || err != nil || logNumber(fields[0]) < 0 || size < -1 {
		return "", -1, fmt.Errorf("%w: %s does not name a write-ahead log: %q", errDamaged, walFileName, b)
	}
	return fields[0], size, nil
}

// logs lists the log files in walDirName and in the data directory, with
// their sizes.
func (r *walRecord) logs() (map[string]int64, error) {
	logs := map[string]int64{}
	for _, dir := range []string{r.fs.PathJoin(r.dir, walDirName), r.dir} {
		names, err := r.fs.List(dir)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, name := range names {
			if logNumber(name) < 0 {
				continue
			}
			info, err := r.fs.Stat(r.fs.PathJoin(dir, name))
			if err != nil {
				return nil, err
			}
			logs[name] = info.Size()
		}
	}
	return logs, nil
}

// newerLog reports whether logs holds one numbered above name's: the
// engine made it, and the record of it did not reach the disk.
func newerLog(logs map[string]int64, name string) bool {
	n := logNumber(name)
	for other := range logs {
		if logNumber(other) > n {
			return true
		}
	}
	return false
}

// logNumber is the number of a log file's name, -1 if name is not one.
func logNumber(name string) int64 {
	digits, ok := strings.CutSuffix(name, ".log")
	if !ok {
		return -1
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || n < 0 {
		return -1
	}
	return n
}

// writeFileSynced replaces dir's file name with content, durably: a new
// file synced, renamed over the old one, and the directory synced, so a
// crash leaves either the old content or the new.
func writeFileSynced(fs vfs.FS, dir, name, content string) error {
	path := fs.PathJoin(dir, name)
	tmp := path + ".tmp"
	f, err := fs.Create(tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	_, err = f.Write([]byte(content))
	if err == nil {
		err = f.Sync()
	}
	if err = errors.Join(err, f.Close()); err != nil {
		return err
	}
	if err := fs.Rename(tmp, path); err != nil {
		return err
	}
	d, err := fs.OpenDir(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}
