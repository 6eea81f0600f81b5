package pebble

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	pebbledb "github.com/cockroachdb/pebble/v2"

	"github.com/metadatad/metadatad/store"
)

var _ store.Purger = (*DB)(nil)

// Exclusive runs stage while no write it may touch runs, from the stage's
// first read to its commit, and commits the stage's batch, synced unless
// the stage says otherwise (store.Purger; gate.go says which writes wait). A stage reads through
// tables as it likes, but writes only through b: a table's write may wait
// for the stage, and would wait for good.
func (d *DB) Exclusive(ctx context.Context, through time.Time, stage func(ctx context.Context, b store.PurgeBatch) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return d.exclusively(through, func() error { return d.stage(ctx, through, stage) })
}

// maxStageBytes bounds the buffer an Exclusive batch starts with.
const maxStageBytes = 64 << 20

// stage runs an Exclusive's stage and commits its batch. The batch starts
// at the size of the last one committed: a purge's sections are alike,
// and a batch that grows from nothing to tens of megabytes copies itself
// at each doubling (a tenth of a thinning's time, profiled).
func (d *DB) stage(ctx context.Context, through time.Time, stage func(ctx context.Context, b store.PurgeBatch) error) error {
	b := &purgeBatch{d: d, batch: d.db.NewBatchWithSize(int(d.stageBytes.Load())), now: d.now().UTC(), staged: map[string]bool{},
		horizon: newHorizon(through)}
	defer b.batch.Close()
	defer b.closeIters()
	if err := stage(ctx, b); err != nil {
		return err
	}
	if b.batch.Empty() {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(b.puts) > 0 && d.admit != nil {
		if err := d.admit(ctx); err != nil {
			return fmt.Errorf("%w: %w", store.ErrInsufficientStorage, err)
		}
	}
	sync := pebbledb.Sync
	if b.unsynced {
		sync = pebbledb.NoSync
	}
	if err := b.batch.Commit(sync); err != nil {
		return fmt.Errorf("pebble: commit: %w", err)
	}
	d.stageBytes.Store(int64(min(b.batch.Len(), maxStageBytes)))
	if b.tombstones > 0 {
		d.warmRangeDels()
		d.flushRangeDels(b.tombstones)
	}
	return nil
}

// closeIters closes the iterators the batch's calls kept open.
func (b *purgeBatch) closeIters() {
	if b.rowIter != nil {
		_ = b.rowIter.Close() // its reads' errors were returned as they came
	}
}

// purgeBatch is Exclusive's store.PurgeBatch. Reads are of the committed
// store, which nothing else changes meanwhile; staged remembers the point
// writes (true: the row is put) and ranges the partition ranges deleted,
// so Delete answers for the batch as it will commit.
type purgeBatch struct {
	d *DB
	// horizon is the stage's: it touches nothing from it on (see
	// beyond), which lets the writes of later days go on meanwhile.
	horizon    *horizon
	batch      *pebbledb.Batch
	now        time.Time
	staged     map[string]bool
	ranges     [][2][]byte
	puts       [][]byte
	tombstones int64
	// unsynced commits the batch without a sync of its own (Unsynced).
	unsynced bool
	// rows is the row range before rowsBoundary: most purges give every
	// partition one boundary, and formatting it is most of a call's cost.
	rowsBoundary time.Time
	rows         store.Range
	// rowRanges are the boundaries DeleteRowsBefore staged, by partition.
	rowRanges map[rowRange]time.Time
	// lower and upper are DeleteRowsBefore's key buffers; rowIter reads
	// the keys of the rows it deletes one by one (deleteDayRows).
	lower, upper []byte
	rowIter      *pebbledb.Iterator
	// lastTable is the table DeleteRowsBefore was last given, lastOwn its
	// table and tallyTable the key of its tallies' (see talliedOnce).
	lastTable  string
	lastOwn    *table
	tallyTable string
	// dayString is day formatted as a tally key's partition (see dayKey).
	day       time.Time
	dayString string
	// unreadTable is the table DeleteUnread was last given, unreadOwn
	// its table, unreadKey its key buffer (see indexdelete.go).
	unreadTable string
	unreadOwn   *table
	unreadKey   []byte
}

// tallied is the named table, with its tally, refused unless its tally is complete:
// a partial one would miscount what DeleteRowsBefore deletes.
func (b *purgeBatch) tallied(table string, op string) (*table, error) {
	own, err := b.d.ownTable(table)
	if err != nil {
		return nil, err
	}
	s := b.d.tallied(own.key)
	switch {
	case s == nil:
		return nil, fmt.Errorf("pebble: %s of %s: the table is not tallied", op, own.name)
	case !s.complete:
		return nil, fmt.Errorf("pebble: %s of %s: the table's tally is not complete yet (see AwaitTally)", op, own.name)
	}
	return own, nil
}

// untallied is the named table, refused if tallied: its rows go only with their
// tallies.
func (b *purgeBatch) untallied(table string, op string) (*table, error) {
	own, err := b.d.ownTable(table)
	if err != nil {
		return nil, err
	}
	if b.d.tallied(own.key) != nil {
		return nil, fmt.Errorf("pebble: %s of %s: %w", op, own.name, errTallied)
	}
	return own, nil
}

// beyond refuses what would touch own's rows from the stage's horizon on,
// which writes of later days may write meanwhile: a minute-keyed table's
// partitions from the horizon's minute on (end is the partition written,
// or the exclusive end of a range, "" for none). (Tallies and
// DeleteRowsBefore refuse a tallied table's rows and tallies from its day
// on.)
func (b *purgeBatch) beyond(own *table, op, end string, exclusiveEnd bool) error {
	h := b.horizon
	if h.from.IsZero() {
		return nil
	}
	m := b.d.minuteKeyed.Load()
	if m == nil || !(*m)[own.key] {
		return nil
	}
	if end == "" || end > h.minute || (!exclusiveEnd && end == h.minute) {
		return fmt.Errorf("pebble: %s of %s: partition %q reaches the section's horizon %s", op, own.name, end, h.minute)
	}
	return nil
}

// Tallies visits the table's tallies of the partitions in partitions up to
// through's UTC day (scanTallies says how it reads them).
func (b *purgeBatch) Tallies(ctx context.Context, table string, partitions store.Range, through time.Time, visit func(*store.DayTally) error) error {
	own, err := b.talliesUpTo(table, through)
	if err != nil {
		return err
	}
	return b.d.scanTallies(ctx, own, tallySelection{span: partitions}, through, visit)
}

// TalliesOf visits the tallies of the named partitions up to through's
// UTC day, day by day, a seek for each partition.
func (b *purgeBatch) TalliesOf(ctx context.Context, table string, partitions []string, through time.Time, visit func(*store.DayTally) error) error {
	own, err := b.talliesUpTo(table, through)
	if err != nil || len(partitions) == 0 {
		return err
	}
	return b.d.scanTallies(ctx, own, tallySelection{only: partitions}, through, visit)
}

// talliesUpTo is the tallied table whose tallies up to through a stage
// reads: refused past the stage's horizon, whose writes go on.
func (b *purgeBatch) talliesUpTo(table string, through time.Time) (*table, error) {
	own, err := b.tallied(table, "tallies")
	if err != nil {
		return nil, err
	}
	if !b.horizon.from.IsZero() && !through.Before(b.horizon.from) {
		return nil, fmt.Errorf("pebble: tallies of %s: %s is past the section's horizon %s", own.name, through.Format(time.RFC3339), b.horizon.from.Format(time.RFC3339))
	}
	return own, nil
}

// tallySelection is which partitions' tallies scanTallies reads: those in
// span, or, if only is not empty, those named in it (sorted).
type tallySelection struct {
	span store.Range
	only []string
}

// scanTallies is Tallies of own, whose tally is complete. Keys are day
// first, so it reads day by day, seeking each day's first partition in
// range (or each partition named): the tallies in range and a seek or two
// per day besides.
//
// It must not step over what a purge's sections deleted before it: they
// delete the tallies of a day from its first camera on, in camera order,
// so a day's first keys are tombstones, as many as the cameras purged. A
// walk from each day's first key stepped over them all at every section:
// a purge of 10,000 cameras in sections of a few took 18 s instead of a
// fraction of a second (BenchmarkPurgeInSections). So it finds the days
// from the newest back (tallyDays), where the live keys are, and seeks
// each day's range directly.
func (d *DB) scanTallies(ctx context.Context, own *table, sel tallySelection, through time.Time, visit func(*store.DayTally) error) error {
	if err := checkRange(sel.span); err != nil {
		return err
	}
	iter, days, err := d.tallyIter(ctx, own, through)
	if err != nil {
		return err
	}
	defer iter.Close()
	tt := tallyTable(own.key)
	visited := 0
	var tally store.DayTally
	var dec tallyDecoder
	// read visits the tally under the iterator, of day and partition pk.
	read := func(day, pk string) error {
		if visited++; visited%ctxCheckEvery == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		value, err := iter.ValueAndErr()
		if err != nil {
			return engineError("read", err)
		}
		if err := dec.decode(&tally, day, pk, value); err != nil {
			return err
		}
		return visit(&tally)
	}
	for _, day := range days {
		if len(sel.only) == 0 {
			for valid := iter.SeekGE(encodeKey(tt, day, sel.span.From)); valid; valid = iter.Next() {
				kday, pk, err := dec.key(tt, iter.Key())
				if err != nil {
					return err
				}
				if kday != day || (sel.span.To != "" && pk >= sel.span.To) {
					break
				}
				if err := read(day, pk); err != nil {
					return err
				}
			}
		}
		for _, p := range sel.only {
			if !iter.SeekGE(encodeKey(tt, day, p)) {
				break
			}
			kday, pk, err := dec.key(tt, iter.Key())
			if err != nil {
				return err
			}
			if kday != day {
				break // no later partition of the day is left
			}
			if pk != p {
				continue
			}
			if err := read(day, pk); err != nil {
				return err
			}
		}
		if err := iter.Error(); err != nil {
			return engineError("iterate", err)
		}
	}
	return ctx.Err()
}

// tallyDays lists the days the iterator's tallies cover, oldest first,
// walking from the newest back one seek per day: each seek lands on the
// last key of the day before, which a purge deletes last (scanTallies).
func tallyDays(iter *pebbledb.Iterator, tt string) ([]string, error) {
	var days []string
	var dec tallyDecoder
	for valid := iter.Last(); valid; {
		day, _, err := dec.key(tt, iter.Key())
		if err != nil {
			return nil, err
		}
		days = append(days, day)
		valid = iter.SeekLT(partitionPrefix(tt, day))
	}
	if err := iter.Error(); err != nil {
		return nil, engineError("iterate", err)
	}
	slices.Reverse(days)
	return days, nil
}

// checkRange checks the bounds of a range given to the batch, which no
// portable layer checks.
func checkRange(r store.Range) error {
	for _, k := range []string{r.From, r.To} {
		if k != "" {
			if err := store.ValidateKey(k); err != nil {
				return err
			}
		}
	}
	return nil
}

// DeleteRowsBefore stages one range deletion of the partition's rows
// captured before boundary, a whole minute, and the tallies' rewrite: a day
// wholly before boundary loses its key, boundary's day keeps the records
// of its minutes from boundary on. A section calls it for every camera and
// day it purges, so it builds its keys in reused buffers: the batch copies
// what it is given.
func (b *purgeBatch) DeleteRowsBefore(table string, partition string, boundary time.Time, tallies []store.DayTally) (int64, error) {
	own, err := b.talliedOnce(table)
	if err != nil {
		return 0, err
	}
	if err := store.ValidateKey(partition); err != nil {
		return 0, err
	}
	boundary = boundary.UTC()
	if !boundary.Truncate(time.Minute).Equal(boundary) {
		return 0, fmt.Errorf("pebble: delete rows of %s: boundary %s is not a whole minute, as tallies count", own.name, boundary.Format(time.RFC3339Nano))
	}
	if !b.horizon.from.IsZero() && !boundary.Before(b.horizon.from) {
		return 0, fmt.Errorf("pebble: delete rows of %s: boundary %s is past the section's horizon %s", own.name, boundary.Format(time.RFC3339), b.horizon.from.Format(time.RFC3339))
	}
	boundaryDay := boundary.Truncate(24 * time.Hour)
	for _, tl := range tallies {
		switch {
		case tl.PartitionKey != partition:
			return 0, fmt.Errorf("pebble: delete rows of %s/%s: given a tally of partition %s", own.name, partition, tl.PartitionKey)
		case tl.Day.After(boundaryDay):
			return 0, fmt.Errorf("pebble: delete rows of %s/%s before %s: given the tally of the later day %s",
				own.name, partition, boundary.Format(time.RFC3339), tl.Day.Format(time.DateOnly))
		case !tl.Day.Equal(tl.Day.UTC().Truncate(24 * time.Hour)):
			return 0, fmt.Errorf("pebble: delete rows of %s/%s: tally day %s is not a UTC midnight", own.name, partition, tl.Day)
		}
	}
	// Bounded below by the first instant, so that row keys that are no
	// instant, and sort after every one, stay.
	if !b.rowsBoundary.Equal(boundary) || b.rows == (store.Range{}) {
		first := store.TimeFromTicks(0)
		b.rowsBoundary, b.rows = boundary, store.InvertedTicksRows(&first, &boundary)
	}
	if b.rowRanges == nil {
		// Made on the first call, large: a section deletes the rows of
		// thousands of cameras, and growing the map was a tenth of its time.
		b.rowRanges = make(map[rowRange]time.Time, 1024)
	}
	staged := rowRange{own.key, partition}
	if at, ok := b.rowRanges[staged]; !ok || !at.Equal(boundary) { // else staged already: a caller visiting a camera's days one by one
		few := true
		for _, tl := range tallies {
			few = few && tl.RowsBefore(boundary) <= pointDeleteRows
		}
		if few {
			for _, tl := range tallies {
				if err := b.deleteDayRows(own, partition, tl.Day, boundary); err != nil {
					return 0, err
				}
			}
		} else {
			b.rowRanges[staged] = boundary
			b.lower = appendKey(b.lower[:0], own.key, partition, b.rows.From)
			b.upper = appendKey(b.upper[:0], own.key, partition, b.rows.To)
			if bytes.Compare(b.lower, b.upper) < 0 {
				if err := b.batch.DeleteRange(b.lower, b.upper, nil); err != nil {
					return 0, fmt.Errorf("pebble: delete range: %w", err)
				}
				b.tombstones++
			}
		}
	}
	var n int64
	for _, tl := range tallies {
		n += tl.RowsBefore(boundary)
		b.lower = appendKey(b.lower[:0], b.tallyTable, b.dayKey(tl.Day), partition)
		var rest []byte
		if tl.Day.Equal(boundaryDay) {
			rest = encodeRows(&tl, int(boundary.Sub(boundaryDay)/time.Minute))
		}
		if len(rest) == 0 {
			err = b.batch.Delete(b.lower, nil)
		} else {
			err = b.batch.Set(b.lower, rest, nil)
		}
		if err != nil {
			return 0, fmt.Errorf("pebble: tally: %w", err)
		}
	}
	return n, nil
}

// pointDeleteRows is the most rows of a camera's day that DeleteRowsBefore
// deletes one by one rather than by a range deletion. A range deletion
// in the memtable costs every read after the commit that adds it: the
// first read fragments all of the memtable's range deletions anew (0.5 to
// 10 ms for one to eight thousand; warmRangeDels pays it in the section),
// after each section, so a purge of 10,000 cameras of ten rows each spent
// most of its sections on it and its requests met their worst waits
// there. A point deletion costs a key read and a key written in the
// section, and nothing after. Under traffic, ten rows a camera went
// faster for the requests by points (p99 over the purge 2.0x before it,
// was 4.3x); fifty a camera went 40 times slower by points and no faster
// for the requests (docs/benchmarks.md, issue 44). A variable only so that
// BenchmarkPurgeStage can measure the other way.
var pointDeleteRows int64 = 16

// deleteDayRows deletes the partition's rows of day captured before
// boundary one by one, reading their keys from the committed store.
func (b *purgeBatch) deleteDayRows(own *table, partition string, day, boundary time.Time) error {
	end := store.MinTime(boundary, day.Add(24*time.Hour))
	keys := store.InvertedTicksRows(&day, &end)
	b.lower = appendKey(b.lower[:0], own.key, partition, keys.From)
	b.upper = appendKey(b.upper[:0], own.key, partition, keys.To)
	if b.rowIter == nil {
		iter, err := b.d.db.NewIter(&pebbledb.IterOptions{LowerBound: b.lower, UpperBound: b.upper})
		if err != nil {
			return engineError("iterate", err)
		}
		b.rowIter = iter
	} else {
		b.rowIter.SetBounds(b.lower, b.upper)
	}
	for valid := b.rowIter.First(); valid; valid = b.rowIter.Next() {
		if err := b.batch.Delete(b.rowIter.Key(), nil); err != nil {
			return fmt.Errorf("pebble: delete: %w", err)
		}
	}
	if err := b.rowIter.Error(); err != nil {
		return engineError("iterate", err)
	}
	return nil
}

// rowRange names a partition whose rows DeleteRowsBefore staged.
type rowRange struct{ table, partition string }

// talliedOnce is tallied for the table of the batch's last call: a section
// gives every call the same.
func (b *purgeBatch) talliedOnce(table string) (*table, error) {
	if table != b.lastTable || b.lastOwn == nil {
		own, err := b.tallied(table, "delete rows")
		if err != nil {
			return nil, err
		}
		b.lastTable, b.lastOwn, b.tallyTable = table, own, tallyTable(own.key)
	}
	return b.lastOwn, nil
}

// dayKey is day as a tally key's partition, formatted once per day: tallies
// come day by day.
func (b *purgeBatch) dayKey(day time.Time) string {
	if !day.Equal(b.day) || b.dayString == "" {
		b.day, b.dayString = day, day.UTC().Format(dayLayout)
	}
	return b.dayString
}

// DeletePartitions stages one range deletion of the table's partitions in
// partitions (empty bounds open).
func (b *purgeBatch) DeletePartitions(table string, partitions store.Range) error {
	own, err := b.untallied(table, "delete partitions")
	if err != nil {
		return err
	}
	if err := checkRange(partitions); err != nil {
		return err
	}
	if err := b.beyond(own, "delete partitions", partitions.To, true); err != nil {
		return err
	}
	prefix := tablePrefix(own.key)
	lower, upper := append(bytes.Clone(prefix), partitions.From...), prefixEnd(prefix)
	if partitions.To != "" {
		upper = append(bytes.Clone(prefix), partitions.To...)
	}
	if bytes.Compare(lower, upper) >= 0 {
		return nil
	}
	if err := b.batch.DeleteRange(lower, upper, nil); err != nil {
		return fmt.Errorf("pebble: delete partitions: %w", err)
	}
	b.tombstones++
	b.ranges = append(b.ranges, [2][]byte{lower, upper})
	for key := range b.staged {
		if key >= string(lower) && key < string(upper) {
			b.staged[key] = false
		}
	}
	return nil
}

func (b *purgeBatch) Delete(table string, key store.Key) (bool, error) {
	own, err := b.untallied(table, "delete")
	if err != nil {
		return false, err
	}
	if err := store.ValidateAddress(key.PartitionKey, key.RowKey); err != nil {
		return false, err
	}
	if err := b.beyond(own, "delete", key.PartitionKey, false); err != nil {
		return false, err
	}
	enc := encodeKey(own.key, key.PartitionKey, key.RowKey)
	present, staged := b.staged[string(enc)]
	if !staged {
		for _, r := range b.ranges {
			if bytes.Compare(enc, r[0]) >= 0 && bytes.Compare(enc, r[1]) < 0 {
				return false, nil
			}
		}
		if present, err = b.d.exists(enc); err != nil {
			return false, err
		}
	}
	if !present {
		return false, nil
	}
	if err := b.batch.Delete(enc, nil); err != nil {
		return false, fmt.Errorf("pebble: delete: %w", err)
	}
	b.staged[string(enc)] = false
	return true, nil
}

// Put stages e over whatever row has its key, stamped as every write is.
func (b *purgeBatch) Put(table string, e store.Entity) (store.Entity, error) {
	own, err := b.untallied(table, "put")
	if err != nil {
		return store.Entity{}, err
	}
	if err := store.ValidateEntity(e); err != nil {
		return store.Entity{}, err
	}
	if err := b.beyond(own, "put", e.PartitionKey, false); err != nil {
		return store.Entity{}, err
	}
	e = b.d.stamp(e, b.now)
	value, err := encodeValue(e)
	if err != nil {
		return store.Entity{}, err
	}
	if err := b.d.stageInstantFirst(b.batch, own.key, e.PartitionKey, e.RowKey); err != nil {
		return store.Entity{}, err
	}
	enc := encodeKey(own.key, e.PartitionKey, e.RowKey)
	if err := b.batch.Set(enc, value, nil); err != nil {
		return store.Entity{}, fmt.Errorf("pebble: put: %w", err)
	}
	b.staged[string(enc)] = true
	b.puts = append(b.puts, partitionPrefix(own.key, e.PartitionKey))
	return e, nil
}

// exists reports whether key is stored, without decoding its value.
func (d *DB) exists(key []byte) (bool, error) {
	_, closer, err := d.db.Get(key)
	if errors.Is(err, pebbledb.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, engineError("get", err)
	}
	return true, closer.Close()
}

// Unsynced commits the batch without its own sync (store.PurgeBatch): the
// log is written in order, so the next synced write makes it durable.
func (b *purgeBatch) Unsynced() { b.unsynced = true }
