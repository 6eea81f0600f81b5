package store

import (
	"context"
	"time"
)

// MinutesPerDay is how many capture minutes a DayTally holds.
const MinutesPerDay = 24 * 60

// Purger is implemented by backends that tally the rows of tables keyed by
// capture instant and delete them by range in atomic batches: the embedded
// store. The retention engine purges through it without reading the rows
// it deletes, and knows their number exactly because the tally of a row is
// written in the row's own batch. Tables are named, as Backend.Table
// names them, not handed over: a decorator of the backend (store/observed)
// forwards a purge as it is, with nothing to unwrap.
type Purger interface {
	// Tally makes the backend keep the named table's tally: per partition and UTC day,
	// the table's rows per capture minute, the instant read from the row key
	// (InvertedTicksRowKey; a row key that does not read as one is not
	// tallied). Every write of the table that adds or removes a row updates the
	// tally in its own batch, whatever the caller. Rows written before the table's
	// first Tally are tallied by a backfill that runs in the background
	// and resumes after a restart; AwaitTally waits for it. Calling Tally
	// again does nothing.
	Tally(ctx context.Context, table string) error
	// AwaitTally waits until the table's tally counts every row of the table. It fails if
	// the table was never given to Tally.
	AwaitTally(ctx context.Context, table string) error
	// Tallies is PurgeBatch.Tallies as the store stands while writes go on:
	// what a dry run or a plan reads.
	Tallies(ctx context.Context, table string, partitions Range, through time.Time, visit func(*DayTally) error) error
	// TalliedPartitions visits the partitions of the tallied table with a
	// tally up to through's UTC day, in partition key order, each with how
	// many days' tallies it has there, as the store stands while writes go
	// on: what sizes a purge's sections where every partition has the same
	// boundary, without decoding a tally.
	TalliedPartitions(ctx context.Context, table string, through time.Time, visit func(partition string, days int) error) error
	// MinuteKeyed declares that the table's partition keys start with the capture
	// minute of their rows (MinutePartitionKey), as an index table's do,
	// so that Exclusive need not hold off its writes of later days. Its
	// first declaration while the table is empty starts the knowledge
	// PurgeBatch.InstantFirst reports.
	MinuteKeyed(ctx context.Context, table string) error
	// Exclusive runs stage while no other write that it may touch runs,
	// then commits what stage put in its batch atomically and durably. A
	// stage that fails commits nothing; its error is returned. Stages see
	// the store as it is, and nothing they may touch changes until the
	// commit, so what a stage reads (tallies, rows, a job's record) holds
	// when it commits. through bounds what it may touch: tallied tables'
	// rows and tallies up to through's UTC day, minute-keyed tables'
	// partitions before the next day, and any row of other tables; the
	// batch refuses the rest. Writes whose every row lies after that day go
	// on meanwhile: a camera's new images never wait for a purge of old
	// ones. A zero through holds off every write.
	Exclusive(ctx context.Context, through time.Time, stage func(ctx context.Context, b PurgeBatch) error) error
	// WatchLate records, from its call until stop, the partitions of the
	// tallied table that writes touch with a row captured before before:
	// what a purge's sections, each of which reads its cameras once, have
	// not seen. A stage of Exclusive that reads it finds every such write
	// committed before the stage.
	WatchLate(table string, before time.Time) (w LateWrites, stop func(), err error)
}

// LateWrites is a Purger's record of late writes (Purger.WatchLate).
type LateWrites interface {
	// Late returns the partitions written so far, sorted, or all when
	// there were too many to keep: then read every partition.
	Late() (partitions []string, all bool)
}

// Sizer is implemented by backends that can tell the bytes of live data
// they hold from their own accounting, without a scan (the embedded
// store): what a storage budget measures.
type Sizer interface {
	// LiveBytes estimates the live data: what the store holds less what
	// its deletions will reclaim. settled is false while the estimate of
	// recent deletions is still being gathered; a budget then waits.
	LiveBytes() (bytes uint64, settled bool)
	// SettleDeletes makes the deletions committed so far count in
	// LiveBytes (once it reports settled again).
	SettleDeletes(ctx context.Context) error
}

// PurgeBatch is what a Purger's Exclusive stage reads and writes. Writes
// are staged and committed together when the stage returns.
type PurgeBatch interface {
	// Tallies visits, in (day, partition key) order, the tallies of the table's
	// partitions in partitions for the days up to through's day, inclusive.
	// The tally visit gets, its Minutes too, is valid during the call
	// only. A day whose rows have all gone may be visited with no rows.
	Tallies(ctx context.Context, table string, partitions Range, through time.Time, visit func(*DayTally) error) error
	// TalliesOf is Tallies of the named partitions alone (sorted), a seek
	// for each partition and day: what a purge's last section reads of
	// the partitions written late (Purger.WatchLate).
	TalliesOf(ctx context.Context, table string, partitions []string, through time.Time, visit func(*DayTally) error) error
	// DeleteRowsBefore deletes the rows of the table's partition captured before
	// boundary, by range, and updates their tallies: tallies must be every
	// tally of that partition up to boundary's day, as Tallies visited
	// them. It returns how many rows it deletes.
	DeleteRowsBefore(table string, partition string, boundary time.Time, tallies []DayTally) (int64, error)
	// ThinRows keeps, of the table's partition's rows captured in [from, to), one
	// per interval of every (intervals aligned on multiples of every since
	// the first instant): the earliest for which prefer is true, else the
	// earliest (prefer nil: the earliest), the keeper rule of package
	// store/retention/policy, which an implementation applies. It deletes the others, by range,
	// updates their tallies and returns their row keys, newest first, for
	// their index rows. every is whole minutes and divides a day; from and
	// to lie on its boundaries. Reads are of the committed store: the batch
	// must not have deleted these rows already.
	ThinRows(ctx context.Context, table string, partition string, from, to time.Time, every time.Duration, prefer func(Entity) bool) ([]string, error)
	// DeletePartitions deletes every row of the table's partitions in partitions
	// by one range deletion. the table must not be tallied.
	DeletePartitions(table string, partitions Range) error
	// Delete deletes the row if there is one and says whether there was.
	// the table must not be tallied.
	Delete(table string, key Key) (bool, error)
	// DeleteUnread deletes the row if there is one without reading
	// whether there is (a point tombstone): for rows whose presence the
	// caller knows or need not count; a Delete or Put of the same key later
	// in the batch does not see it. the table must not be tallied.
	DeleteUnread(table string, key Key) error
	// Put writes e over whatever row has its key and returns it as it will
	// be stored, with a new ETag and Timestamp. the table must not be tallied.
	Put(table string, e Entity) (Entity, error)
	// InstantFirst reports whether every row of the minute-keyed table
	// has a row key that is its capture instant (InvertedTicksRowKey, in
	// the partition's minute), "_" and a rest that does not end in such
	// an instant, as this service's index rows do: the table was empty
	// when MinuteKeyed first declared it and no row of another form (the
	// fleet's <camera>_<row key>) was written since. A purge then deletes
	// an index row by its one key. False when the store cannot tell.
	InstantFirst(table string) bool
	// Unsynced lets the batch commit without waiting for the log's sync,
	// which the next synced write does: for a stage that a crash may lose
	// whole (it is then a stage not yet run), and whose writes nothing
	// outside the store acts on meanwhile.
	Unsynced()
}

// DayTally counts one partition's rows per capture minute of one UTC day.
type DayTally struct {
	PartitionKey string
	// Day is the UTC midnight that starts the day.
	Day time.Time
	// Minutes are the minutes of the day that hold rows, in order: sparse,
	// since a purge reads one tally per camera and day.
	Minutes []MinuteRows
}

// MinuteRows is how many rows one minute of a DayTally holds.
type MinuteRows struct {
	// Minute counts from the day's start: 0 is [Day, Day+1m).
	Minute int
	Rows   int32
}

// RowsBefore is how many of the day's rows lie in the minutes that end
// by t: all those captured before t when t is a whole minute, as purge
// boundaries are.
func (d *DayTally) RowsBefore(t time.Time) int64 {
	end := int(t.Sub(d.Day) / time.Minute)
	var n int64
	for _, m := range d.Minutes {
		if m.Minute >= end {
			break
		}
		n += int64(m.Rows)
	}
	return n
}

// Total is how many rows the day holds.
func (d *DayTally) Total() int64 { return d.RowsBefore(d.Day.Add(24 * time.Hour)) }

// Oldest is the start of the day's first minute with rows, and false if
// the day has none.
func (d *DayTally) Oldest() (time.Time, bool) {
	for _, m := range d.Minutes {
		if m.Rows > 0 {
			return d.Day.Add(time.Duration(m.Minute) * time.Minute), true
		}
	}
	return time.Time{}, false
}

// PerMinute is the tally with a count for every minute of the day.
func (d *DayTally) PerMinute() (out [MinutesPerDay]int32) {
	for _, m := range d.Minutes {
		out[m.Minute] = m.Rows
	}
	return out
}
