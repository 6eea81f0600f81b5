package pebble

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	pebbledb "github.com/cockroachdb/pebble/v2"

	"github.com/metadatad/metadatad/store"
)

// Tallies (store.Purger): per tallied table, UTC day and partition, one key
// whose value is a list of 2-byte records, one per row added or removed.
// A write adds its record with a merge in its own batch, so it reads
// nothing more than it did; the merger concatenates (see merge.go).
//
// A tally key is a row key of the table "~tally~" + the table's key, the
// day (yyyyMMdd) as its partition and the table's partition as its row:
// table keys are lower-case letters and digits, so none is "~..." and no
// table's rows reach a tally, and all tallies sort after every table. Day
// first, a purge scans only the expired days.
const (
	tallyTablePrefix = "~tally~"
	dayLayout        = "20060102"
	// removalBit marks a record of a row removed; the low 11 bits hold the
	// minute of the day.
	removalBit = 0x8000
	minuteMask = 0x07ff
)

// tallyMetaPrefix starts each tallied table's backfill record, below every
// table's keys as the flush marks are.
var tallyMetaPrefix = []byte{sep, 't', 'a', 'l', 'l', 'y', sep}

// The backfill record's value: complete, or the last key scanned.
const (
	metaComplete = 'c'
	metaCursor   = 'k'
)

// backfillSectionRows is how many rows a backfill scans under one hold of
// the exclusive gate, writes waiting meanwhile: a few milliseconds' worth.
// Tests lower it.
var backfillSectionRows = 10000

// backfillAfterSection, set by tests, runs after each section and stops
// the backfill, as a crash would, if it returns false.
var backfillAfterSection func() bool

// errTallied refuses a write that would remove a tallied table's rows
// without its tally: such tables are purged only through Exclusive.
var errTallied = errors.New("the table is tallied: its rows are deleted only by their own writes or Exclusive's DeleteRowsBefore")

func tallyTable(tableKey string) string { return tallyTablePrefix + tableKey }

func tallyKey(tableKey string, day time.Time, partitionKey string) []byte {
	return encodeKey(tallyTable(tableKey), day.Format(dayLayout), partitionKey)
}

func tallyMetaKey(tableKey string) []byte { return append(bytes.Clone(tallyMetaPrefix), tableKey...) }

// rowTally is the tally key and record of a row added (or removed), false
// if its row key is no capture instant.
func rowTally(tableKey, partitionKey, rowKey string, removed bool) (key, record []byte, ok bool) {
	at, err := store.TimeFromInvertedTicksRowKey(rowKey)
	if err != nil {
		return nil, nil, false
	}
	at = at.UTC()
	day := at.Truncate(24 * time.Hour)
	r := uint16(at.Hour()*60 + at.Minute())
	if removed {
		r |= removalBit
	}
	return tallyKey(tableKey, day, partitionKey), binary.BigEndian.AppendUint16(nil, r), true
}

// tallyDecoder folds tally values into DayTallies, reusing its scratch: a
// scan decodes one tally per camera and day.
type tallyDecoder struct {
	rows    [store.MinutesPerDay]int32
	touched []int
	// day is the day of the last key, and at its midnight or a parse
	// error: keys come day by day, so most keys parse none.
	day   string
	at    time.Time
	atErr error
}

// key splits a tally key of table tt into its day and partition; the day
// string is shared with the key before when it is the same day.
func (dec *tallyDecoder) key(tt string, key []byte) (day, partitionKey string, err error) {
	rest := key[len(tt)+1:]
	i := bytes.IndexByte(rest, sep)
	if i < 0 {
		return "", "", fmt.Errorf("%w: key %q", errCorrupt, key)
	}
	if string(rest[:i]) != dec.day {
		dec.day = string(rest[:i])
		dec.at, dec.atErr = time.Parse(dayLayout, dec.day)
	}
	return dec.day, string(rest[i+1:]), nil
}

// decode folds a tally key's records into t, which it overwrites, reusing
// t.Minutes. day is the one key last gave.
func (dec *tallyDecoder) decode(t *store.DayTally, day, partitionKey string, value []byte) error {
	if day != dec.day {
		dec.day = day
		dec.at, dec.atErr = time.Parse(dayLayout, day)
	}
	if dec.atErr != nil || len(value)%2 != 0 {
		return fmt.Errorf("%w: tally of %s on %q", errCorrupt, partitionKey, day)
	}
	t.PartitionKey, t.Day, t.Minutes = partitionKey, dec.at, t.Minutes[:0]
	dec.touched = dec.touched[:0]
	for i := 0; i < len(value); i += 2 {
		r := binary.BigEndian.Uint16(value[i:])
		m := int(r & minuteMask)
		if m >= store.MinutesPerDay || r&^(removalBit|minuteMask) != 0 {
			for _, m := range dec.touched {
				dec.rows[m] = 0
			}
			return fmt.Errorf("%w: tally of %s on %s: record %#04x", errCorrupt, partitionKey, day, r)
		}
		if dec.rows[m] == 0 {
			dec.touched = append(dec.touched, m)
		}
		if r&removalBit != 0 {
			dec.rows[m]--
		} else {
			dec.rows[m]++
		}
	}
	slices.Sort(dec.touched)
	for _, m := range slices.Compact(dec.touched) {
		if dec.rows[m] != 0 {
			t.Minutes = append(t.Minutes, store.MinuteRows{Minute: m, Rows: dec.rows[m]})
		}
		dec.rows[m] = 0
	}
	return nil
}

// encodeRows is the records of the tally's minutes from from on, each
// minute's rows as that many records (a negative count as removals).
func encodeRows(t *store.DayTally, from int) []byte {
	var out []byte
	for _, m := range t.Minutes {
		if m.Minute < from {
			continue
		}
		r, n := uint16(m.Minute), m.Rows
		if n < 0 {
			r, n = r|removalBit, -n
		}
		for range n {
			out = binary.BigEndian.AppendUint16(out, r)
		}
	}
	return out
}

// tallyState is one tallied table's. cursor and complete change only under
// the exclusive gate and are read under the shared one, so apply sees them
// fixed from its reads to its commit.
type tallyState struct {
	key, name string
	// cursor is the last key the backfill scanned and tallied, nil before
	// its first section.
	cursor   []byte
	complete bool
	// done is closed once complete.
	done chan struct{}
	// rows counts the rows the backfill tallied since Open; finished is
	// complete, for readers without the gate.
	rows     atomic.Int64
	finished atomic.Bool
}

// counts reports whether a write of key must update the tally: the
// backfill scanned it already (or will never), rather than it scanning
// what the write leaves.
func (s *tallyState) counts(key []byte) bool {
	return s.complete || (s.cursor != nil && bytes.Compare(key, s.cursor) <= 0)
}

// tallied is the table key's state, nil if it is not tallied.
func (d *DB) tallied(tableKey string) *tallyState {
	if m := d.tallies.Load(); m != nil {
		return (*m)[tableKey]
	}
	return nil
}

// ownTable is this DB's table of the given name; Backend.Table names
// tables the same way.
func (d *DB) ownTable(name string) (*table, error) {
	if err := store.ValidateTableName(name); err != nil {
		return nil, err
	}
	return &table{db: d, name: name, key: strings.ToLower(name)}, nil
}

// Tally makes the store keep the table's tally (store.Purger). A table with rows
// and no tally is tallied by a backfill in the background, which resumes
// after a restart when Tally is called again.
func (d *DB) Tally(ctx context.Context, table string) error {
	own, err := d.ownTable(table)
	if err != nil {
		return err
	}
	d.tallyMu.Lock()
	defer d.tallyMu.Unlock()
	if d.tallied(own.key) != nil {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if d.closing.Err() != nil {
		return errors.New("pebble: tally: the store is closed")
	}
	// Registered with every write held off, so that each either sees the
	// table untallied, and commits before, or tallied.
	return d.exclusively(time.Time{}, func() error { return d.register(ctx, own) })
}

// register starts own's tally: complete if it holds no rows, else from the
// backfill's record, resumed.
func (d *DB) register(ctx context.Context, own *table) error {
	s := &tallyState{key: own.key, name: own.name, done: make(chan struct{})}
	meta, closer, err := d.db.Get(tallyMetaKey(own.key))
	switch {
	case errors.Is(err, pebbledb.ErrNotFound):
		empty, err := d.isEmpty(ctx, tablePrefix(own.key))
		if err != nil {
			return err
		}
		if empty {
			if err := d.db.Set(tallyMetaKey(own.key), []byte{metaComplete}, pebbledb.Sync); err != nil {
				return fmt.Errorf("pebble: tally: %w", err)
			}
			s.complete = true
		}
	case err != nil:
		return engineError("tally", err)
	default:
		switch {
		case len(meta) == 1 && meta[0] == metaComplete:
			s.complete = true
		case len(meta) > 1 && meta[0] == metaCursor:
			s.cursor = bytes.Clone(meta[1:])
		default:
			err = fmt.Errorf("%w: tally record of %s: %q", errCorrupt, own.key, meta)
		}
		closer.Close()
		if err != nil {
			return err
		}
	}
	next := map[string]*tallyState{}
	if m := d.tallies.Load(); m != nil {
		next = maps.Clone(*m)
	}
	next[own.key] = s
	d.tallies.Store(&next)
	if s.complete {
		s.finished.Store(true)
		close(s.done)
		return nil
	}
	d.backfills.Add(1)
	go d.backfill(s)
	return nil
}

// isEmpty reports whether no key starts with prefix.
func (d *DB) isEmpty(ctx context.Context, prefix []byte) (bool, error) {
	iter, err := d.db.NewIterWithContext(ctx, &pebbledb.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return false, engineError("iterate", err)
	}
	empty := !iter.First()
	if err := errors.Join(iter.Error(), iter.Close()); err != nil {
		return false, engineError("iterate", err)
	}
	return empty, nil
}

// Tallies visits the table's tallies as the store stands while writes go on
// (store.Purger): what a dry run or a purge's survey reads. It is refused
// until the table's tally is complete.
func (d *DB) Tallies(ctx context.Context, table string, partitions store.Range, through time.Time, visit func(*store.DayTally) error) error {
	own, err := d.finishedTally(table, "tallies")
	if err != nil {
		return err
	}
	return d.scanTallies(ctx, own, tallySelection{span: partitions}, through, visit)
}

// finishedTally is the named table, refused unless its tally is complete.
func (d *DB) finishedTally(table, op string) (*table, error) {
	own, err := d.ownTable(table)
	if err != nil {
		return nil, err
	}
	switch s := d.tallied(own.key); {
	case s == nil:
		return nil, fmt.Errorf("pebble: %s of %s: the table is not tallied", op, own.name)
	case !s.finished.Load():
		return nil, fmt.Errorf("pebble: %s of %s: the table's tally is not complete yet (see AwaitTally)", op, own.name)
	}
	return own, nil
}

// tallyIter is an iterator over the tallies of own up to through's UTC day,
// and the days they cover, oldest first (tallyDays).
func (d *DB) tallyIter(ctx context.Context, own *table, through time.Time) (*pebbledb.Iterator, []string, error) {
	tt := tallyTable(own.key)
	iter, err := d.db.NewIterWithContext(ctx, &pebbledb.IterOptions{
		LowerBound: tablePrefix(tt),
		UpperBound: prefixEnd(partitionPrefix(tt, through.UTC().Format(dayLayout))),
	})
	if err != nil {
		return nil, nil, engineError("iterate", err)
	}
	days, err := tallyDays(iter, tt)
	if err != nil {
		_ = iter.Close() // its error is err's
		return nil, nil, err
	}
	return iter, days, nil
}

// TalliedPartitions visits the partitions with a tally up to through's UTC
// day (store.Purger), in partition key order, each with its number of day
// tallies there. It reads keys alone, day by day as scanTallies does (a
// seek per day from the newest back, then the day's keys), and merges the
// days' lists: a purge has one or two expired days to read, most often.
func (d *DB) TalliedPartitions(ctx context.Context, table string, through time.Time, visit func(partition string, days int) error) error {
	own, err := d.finishedTally(table, "tallied partitions")
	if err != nil {
		return err
	}
	iter, days, err := d.tallyIter(ctx, own, through)
	if err != nil {
		return err
	}
	defer iter.Close()
	tt := tallyTable(own.key)
	var dec tallyDecoder
	lists := make([][]string, 0, len(days))
	read := 0
	for _, day := range days {
		var list []string
		for valid := iter.SeekGE(partitionPrefix(tt, day)); valid; valid = iter.Next() {
			if read++; read%ctxCheckEvery == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			kday, pk, err := dec.key(tt, iter.Key())
			if err != nil {
				return err
			}
			if kday != day {
				break
			}
			list = append(list, pk)
		}
		if err := iter.Error(); err != nil {
			return engineError("iterate", err)
		}
		lists = append(lists, list)
	}
	return mergeSorted(lists, visit)
}

// mergeSorted visits the strings of sorted lists in order, each once, with
// how many of the lists hold it.
func mergeSorted(lists [][]string, visit func(s string, n int) error) error {
	at := make([]int, len(lists))
	for {
		next, found := "", false
		for i, l := range lists {
			if at[i] < len(l) && (!found || l[at[i]] < next) {
				next, found = l[at[i]], true
			}
		}
		if !found {
			return nil
		}
		n := 0
		for i, l := range lists {
			if at[i] < len(l) && l[at[i]] == next {
				at[i]++
				n++
			}
		}
		if err := visit(next, n); err != nil {
			return err
		}
	}
}

// AwaitTally waits until the table's backfill is complete (store.Purger).
func (d *DB) AwaitTally(ctx context.Context, table string) error {
	own, err := d.ownTable(table)
	if err != nil {
		return err
	}
	s := d.tallied(own.key)
	if s == nil {
		return fmt.Errorf("pebble: table %s is not tallied: Tally was never called for it", own.name)
	}
	select {
	case <-s.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-d.closing.Done():
		return fmt.Errorf("pebble: tally of %s: the store is closed", own.name)
	}
}

// TallyProgress is the table's backfill for metrics: the rows it tallied since
// Open, and whether the tally is complete. It fails if the table is not tallied.
func (d *DB) TallyProgress(table string) (rows int64, complete bool, err error) {
	own, err := d.ownTable(table)
	if err != nil {
		return 0, false, err
	}
	s := d.tallied(own.key)
	if s == nil {
		return 0, false, fmt.Errorf("pebble: table %s is not tallied", own.name)
	}
	return s.rows.Load(), s.finished.Load(), nil
}

// backfillLogEvery is how often a backfill logs its progress.
const backfillLogEvery = 10 * time.Second

// backfill tallies the rows of s's table in key order, a section at a
// time, until complete or the DB closes. A failed section is retried.
func (d *DB) backfill(s *tallyState) {
	defer d.backfills.Done()
	start, logged := time.Now(), time.Now()
	d.log.Info("pebble: tallying a table's rows", "table", s.name, "resumed", s.cursor != nil)
	for d.closing.Err() == nil {
		complete, err := d.backfillSection(s)
		switch {
		case err != nil && d.closing.Err() == nil:
			d.log.Error("pebble: tallying a table's rows; retrying", "table", s.name, "err", err)
			select {
			case <-d.closing.Done():
			case <-time.After(time.Second):
			}
		case backfillAfterSection != nil && !backfillAfterSection():
			return
		case complete:
			d.log.Info("pebble: tallied a table's rows", "table", s.name, "rows", s.rows.Load(), "duration", time.Since(start).Round(time.Millisecond))
			return
		case time.Since(logged) >= backfillLogEvery:
			logged = time.Now()
			d.log.Info("pebble: tallying a table's rows", "table", s.name, "rows", s.rows.Load(), "duration", time.Since(start).Round(time.Second))
		}
	}
}

// backfillSection tallies up to backfillSectionRows rows after the cursor
// under the exclusive gate, and commits their records with the new cursor
// in one batch: after a crash the tally and the cursor agree.
func (d *DB) backfillSection(s *tallyState) (complete bool, err error) {
	err = d.exclusively(time.Time{}, func() error {
		complete, err = d.tallySection(s)
		return err
	})
	return complete, err
}

// tallySection is backfillSection's work, with every write held off.
func (d *DB) tallySection(s *tallyState) (complete bool, err error) {
	if err := d.closing.Err(); err != nil {
		return false, err
	}
	prefix := tablePrefix(s.key)
	lower := prefix
	if s.cursor != nil {
		lower = append(bytes.Clone(s.cursor), 0) // the cursor's successor
	}
	iter, err := d.db.NewIterWithContext(d.closing, &pebbledb.IterOptions{LowerBound: lower, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return false, engineError("iterate", err)
	}
	defer iter.Close()
	records := map[string][]byte{}
	var last []byte
	n := 0
	complete = true
	for valid := iter.First(); valid; valid = iter.Next() {
		if n == backfillSectionRows {
			complete = false
			break
		}
		n++
		last = append(last[:0], iter.Key()...)
		pk, rk, err := decodeKey(s.key, iter.Key())
		if err != nil {
			return false, err
		}
		if key, rec, ok := rowTally(s.key, pk, rk, false); ok {
			records[string(key)] = append(records[string(key)], rec...)
		}
	}
	if err := iter.Error(); err != nil {
		return false, engineError("iterate", err)
	}
	batch := d.db.NewBatch()
	defer batch.Close()
	for key, recs := range records {
		if err := batch.Merge([]byte(key), recs, nil); err != nil {
			return false, fmt.Errorf("pebble: tally: %w", err)
		}
	}
	meta := []byte{metaComplete}
	if !complete {
		meta = append([]byte{metaCursor}, last...)
	}
	if err := batch.Set(tallyMetaKey(s.key), meta, nil); err != nil {
		return false, fmt.Errorf("pebble: tally: %w", err)
	}
	if err := batch.Commit(pebbledb.Sync); err != nil {
		return false, fmt.Errorf("pebble: tally: commit: %w", err)
	}
	s.rows.Add(int64(n))
	if n > 0 {
		s.cursor = bytes.Clone(last)
	}
	if complete {
		s.complete = true
		s.finished.Store(true)
		close(s.done)
	}
	return complete, nil
}
