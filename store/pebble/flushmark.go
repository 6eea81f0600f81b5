package pebble

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	pebbledb "github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Flush marks detect a MANIFEST cut short.
//
// Pebble lists its table files in the MANIFEST, one record per flush or
// compaction, and must read a torn last record as a crash in the middle of
// writing it. So a MANIFEST that loses its tail (a bad disk, a copy cut off)
// opens without a word as of its last whole record: the tables that later
// flushes wrote are deleted as unreferenced, and their write-ahead logs went
// when the flushes were recorded. The rows are gone and nothing says so.
//
// The store therefore keeps a chain of marks. After each flush it writes a
// new mark key (mark n+1) into the memtable, so nearly every flushed table
// holds one, and it records in markFileName the newest mark that a durable
// read (only flushed tables, whose MANIFEST record is synced before Pebble
// reports the flush) can see, with the oldest mark kept: marks are deleted
// only below a newer recorded one, markTrim at a time, and the file names
// the new oldest before they go. So in an undamaged store every mark from
// the oldest kept to the recorded one is there, through any crash: each
// reached a table file whose record was synced before the file was
// written. At open, a mark of that run that the store does not hold means
// the MANIFEST lost the record of flushed data, and the store refuses to
// open. It checks the whole run, not just the recorded mark: the engine
// keeps an obsolete log file for reuse and replays it after such a cut, so
// the newest lost flush may come back while older ones do not.
//
// What it misses: a cut that takes only the flushes since the last recorded
// mark (the instant between a flush and its record, or flushes of memtables
// that queued up before holding a mark), and damage to both files at once. A
// directory without markFileName (new, restored from a backup, or written
// before the marks) is not checked until its first flush.
const markFileName = "METADATAD-FLUSHED"

// markPrefix starts every mark key. Table keys start with the table's name,
// which is never empty, so no table read, purge or range delete reaches
// them.
var markPrefix = []byte{sep, 'f', 'l', 'u', 's', 'h', 'e', 'd', sep}

// errDamaged marks a check that found the directory damaged.
var errDamaged = errors.New("damaged")

func markKey(n uint64) []byte { return binary.BigEndian.AppendUint64(bytes.Clone(markPrefix), n) }

// flushMarks keeps the chain for one open DB. Its goroutine is the only
// writer of marks and of the file; Pebble's flush events wake it.
type flushMarks struct {
	fs    vfs.FS
	dir   string
	log   *slog.Logger
	admit func(ctx context.Context) error
	db    *pebbledb.DB
	// wake has room for one signal: flushes that end while the goroutine
	// works fold into one more pass.
	wake    chan struct{}
	stop    chan struct{}
	closing sync.Once
	done    chan struct{}
	// next is the next mark to write, recorded the mark in the file and
	// floor the oldest kept one it names; the goroutine alone touches them
	// once it runs.
	next, recorded, floor uint64
	// disabled stops the chain for this run (see unreadable).
	disabled bool
	// now, failed and failLogged keep a failing record of the mark (a
	// full disk, where every flush retry wakes the goroutine) to one log
	// line a minute, with the count of failures since the last.
	now        func() time.Time
	failed     int
	failLogged time.Time
}

func newFlushMarks(opts Options) *flushMarks {
	return &flushMarks{fs: opts.FS, dir: opts.Dir, log: opts.Logger, admit: opts.AdmitWrite, now: opts.Now,
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
}

// flushed is Pebble's FlushEnd listener. Pebble may call it holding its own
// locks, so it only wakes the goroutine.
func (m *flushMarks) flushed(pebbledb.FlushInfo) {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// check reads the recorded mark and fails if the store lacks it or any
// mark between it and the oldest kept; it then starts the chain past every
// mark the store holds. A file of an older build names no oldest mark:
// then the marks present below the recorded one must be a run without gaps.
func (m *flushMarks) check(db *pebbledb.DB) error {
	m.db = db
	recorded, floor, err := m.readFile()
	if err != nil {
		return err
	}
	it, err := db.NewIter(&pebbledb.IterOptions{LowerBound: markPrefix, UpperBound: markKey(^uint64(0))})
	if err != nil {
		return m.unreadable(err)
	}
	var newest, run, runStart uint64 // run: the last mark of the run below recorded
	var gap error
	for valid := it.First(); valid; valid = it.Next() {
		n, err := markOf(it.Key())
		if err != nil {
			return errors.Join(fmt.Errorf("%w: %v", errDamaged, err), it.Close())
		}
		switch {
		case n < floor || n > recorded:
		case run == 0 && floor > 0 && n != floor:
			gap = cmp.Or(gap, fmt.Errorf("flush marks %d to %d", floor, n-1))
		case run > 0 && n != run+1:
			gap = cmp.Or(gap, fmt.Errorf("flush marks %d to %d", run+1, n-1))
		}
		if n >= floor && n <= recorded {
			runStart = cmp.Or(runStart, n)
			run = n
		}
		newest = n
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return m.unreadable(err)
	}
	if recorded > 0 && gap == nil && run != recorded {
		gap = fmt.Errorf("flush mark %d", recorded)
	}
	if recorded > 0 && gap != nil {
		return fmt.Errorf("%w: its MANIFEST has lost the record of rows flushed to table files: %s names flush mark %d, and the store lacks %v", errDamaged, markFileName, recorded, gap)
	}
	m.recorded = recorded
	m.next = max(newest, recorded) + 1
	// Without a recorded run, the oldest mark kept is the first this run
	// writes.
	m.floor = cmp.Or(floor, runStart, m.next)
	return nil
}

// unreadable handles an engine error met reading the marks: a damaged
// table file fails only the reads of its keys (the engine has logged it),
// and the marks are among them, so this run keeps no marks and the check
// waits for a store whose marks can be read. Other errors fail the open.
func (m *flushMarks) unreadable(err error) error {
	if !pebbledb.IsCorruptionError(err) {
		return engineError("iterate flush marks", err)
	}
	m.log.Warn("pebble: the flush marks sit in a damaged table file; this run neither checks nor keeps them", "err", err)
	m.disabled = true
	return nil
}

// markOf is the number of a mark key.
func markOf(key []byte) (uint64, error) {
	if len(key) != len(markPrefix)+8 || !bytes.HasPrefix(key, markPrefix) {
		return 0, fmt.Errorf("%w: flush mark key %q", errCorrupt, key)
	}
	return binary.BigEndian.Uint64(key[len(markPrefix):]), nil
}

// run writes the first mark, then after each flush records the newest
// durable mark and writes the next, until close.
func (m *flushMarks) run() {
	defer close(m.done)
	if m.disabled {
		<-m.stop
		return
	}
	m.writeMark()
	for {
		select {
		case <-m.stop:
			return
		case <-m.wake:
			m.advance()
		}
	}
}

// close stops the goroutine and waits for it; the DB is still open. Only
// the first call does anything.
func (m *flushMarks) close() {
	m.closing.Do(func() { close(m.stop) })
	<-m.done
}

func (m *flushMarks) advance() {
	durable, err := m.newestMark(true)
	if err != nil {
		m.log.Warn("pebble: reading the flush marks", "err", err)
		return
	}
	if durable > m.recorded {
		trim := durable/markTrim > m.recorded/markTrim
		// The durable mark may be older than this run's first: one a copy
		// of the store held, flushed only now.
		floor := min(m.floor, durable)
		if trim {
			floor = durable
		}
		if err := m.writeFile(durable, floor); err != nil {
			// The file keeps the older mark, which the store keeps too.
			m.failed++
			if now := m.now(); m.failLogged.IsZero() || now.Sub(m.failLogged) >= time.Minute {
				m.log.Warn("pebble: recording the flush mark", "file", m.fs.PathJoin(m.dir, markFileName), "err", err,
					"failures_since_last_line", m.failed)
				m.failed, m.failLogged = 0, now
			}
			return
		}
		m.failed, m.failLogged = 0, time.Time{}
		// Older marks are no longer needed once the file names this one.
		// They go markTrim at a time: a tombstone of a key in an older table
		// file raises that file's compaction score, and Pebble would
		// otherwise rewrite the newest table files after every flush.
		if trim {
			if err := m.deleteBelow(durable); err != nil {
				m.log.Warn("pebble: deleting old flush marks", "err", err)
			}
		}
		m.recorded, m.floor = durable, floor
	}
	m.writeMark()
}

// markTrim is how many flushes pass between deletions of old marks: a
// mark is a key of about 20 bytes, and at the default memtable size a busy
// store flushes every few seconds.
const markTrim = 1024

// deleteBelow deletes the marks older than n, with point tombstones (a
// range tombstone would have Pebble rewrite every table file under it).
func (m *flushMarks) deleteBelow(n uint64) error {
	it, err := m.db.NewIter(&pebbledb.IterOptions{LowerBound: markPrefix, UpperBound: markKey(n)})
	if err != nil {
		return err
	}
	b := m.db.NewBatch()
	for valid := it.First(); valid; valid = it.Next() {
		err = errors.Join(err, b.Delete(it.Key(), nil))
	}
	err = errors.Join(err, it.Error(), it.Close())
	if err == nil && !b.Empty() {
		err = b.Commit(pebbledb.NoSync)
	}
	return errors.Join(err, b.Close())
}

// writeMark puts the next mark into the memtable. It needs no sync: it
// counts only once a flush has made it durable. A write the free-space
// guard refuses is skipped; the chain goes on at the next flush.
func (m *flushMarks) writeMark() {
	if m.admit != nil && m.admit(context.Background()) != nil {
		return
	}
	if err := m.db.Set(markKey(m.next), nil, pebbledb.NoSync); err != nil {
		m.log.Warn("pebble: writing a flush mark", "err", err)
		return
	}
	m.next++
}

// newestMark is the highest mark the store holds, 0 for none; durable
// reads only flushed tables.
func (m *flushMarks) newestMark(durable bool) (uint64, error) {
	it, err := m.db.NewIter(&pebbledb.IterOptions{
		LowerBound:                markPrefix,
		UpperBound:                markKey(^uint64(0)),
		OnlyReadGuaranteedDurable: durable,
	})
	if err != nil {
		return 0, engineError("iterate flush marks", err)
	}
	var n uint64
	if it.Last() {
		n, err = markOf(it.Key())
	}
	return n, errors.Join(err, it.Error(), it.Close())
}

// readFile returns the recorded mark and the oldest kept, 0 and 0 when
// there is no file; an older build's file names no oldest (0).
func (m *flushMarks) readFile() (recorded, floor uint64, err error) {
	f, err := m.fs.Open(m.fs.PathJoin(m.dir, markFileName))
	if errors.Is(err, os.ErrNotExist) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("open %s: %w", markFileName, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 64))
	if err != nil {
		return 0, 0, fmt.Errorf("read %s: %w", markFileName, err)
	}
	fields := strings.Fields(string(b))
	if len(fields) == 1 || len(fields) == 2 {
		recorded, err = strconv.ParseUint(fields[0], 10, 64)
		if err == nil && len(fields) == 2 {
			floor, err = strconv.ParseUint(fields[1], 10, 64)
		}
		if err == nil && floor <= recorded {
			return recorded, floor, nil
		}
	}
	return 0, 0, fmt.Errorf("%w: %s does not hold a flush mark: %q", errDamaged, markFileName, b)
}

// writeFile replaces the file with mark n and the oldest kept, durably, so
// a crash leaves either the old marks or the new ones.
func (m *flushMarks) writeFile(n, floor uint64) error {
	return writeFileSynced(m.fs, m.dir, markFileName, strconv.FormatUint(n, 10)+" "+strconv.FormatUint(floor, 10)+"\n")
}
