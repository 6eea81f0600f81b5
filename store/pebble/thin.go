package pebble

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"time"

	pebbledb "github.com/cockroachdb/pebble/v2"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/retention/policy"
)

// ThinRows stages the thinning of a tallied table's partition over
// [from, to): of each interval of every, it keeps the row the keeper rule
// (store/retention/policy's Intervals) keeps and deletes the others by
// range, their tallies following with a removal record each. Row keys are
// inverted ticks, newest first, so an interval's rows are one key range,
// read once for its keys (values only when prefer is given, to choose by
// them), and cost one range deletion, or two around a keeper prefer chose
// from their middle. It returns the deleted row keys, newest first, for
// their index rows.
func (b *purgeBatch) ThinRows(ctx context.Context, table string, partition string, from, to time.Time, every time.Duration, prefer func(store.Entity) bool) ([]string, error) {
	own, err := b.tallied(table, "thin rows")
	if err != nil {
		return nil, err
	}
	from, to = from.UTC(), to.UTC()
	if err := checkThinning(partition, from, to, every); err != nil {
		return nil, fmt.Errorf("pebble: thin rows of %s/%s: %w", own.name, partition, err)
	}
	if !b.horizon.from.IsZero() && to.After(b.horizon.from) {
		return nil, fmt.Errorf("pebble: thin rows of %s/%s: %s is past the section's horizon %s", own.name, partition, to.Format(time.RFC3339), b.horizon.from.Format(time.RFC3339))
	}
	rows := store.InvertedTicksRows(&from, &to)
	iter, err := b.d.db.NewIterWithContext(ctx, &pebbledb.IterOptions{
		LowerBound: appendKey(nil, own.key, partition, rows.From),
		UpperBound: appendKey(nil, own.key, partition, rows.To),
	})
	if err != nil {
		return nil, engineError("iterate", err)
	}
	defer iter.Close()
	th := thinner{b: b, own: own, partition: partition, prefix: appendKey(nil, own.key, partition, ""), tallies: map[string][]byte{}}
	intervals := policy.NewIntervals(every, th.thin)
	read := 0
	for valid := iter.First(); valid; valid = iter.Next() {
		if read++; read%ctxCheckEvery == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		key := iter.Key()
		if !bytes.HasPrefix(key, th.prefix) {
			return nil, fmt.Errorf("%w: key %q in %s/%s", errCorrupt, key, own.name, partition)
		}
		rowKey := string(key[len(th.prefix):])
		at, err := store.TimeFromInvertedTicksRowKey(rowKey)
		if err != nil {
			return nil, fmt.Errorf("%w: row key %q of %s in a capture range", errCorrupt, rowKey, own.name)
		}
		preferred := false
		if prefer != nil {
			value, err := iter.ValueAndErr()
			if err != nil {
				return nil, engineError("read", err)
			}
			e, err := decodeValue(partition, rowKey, value)
			if err != nil {
				return nil, err
			}
			preferred = prefer(e)
		}
		if err := intervals.Add(at, thinRow{at: at, rowKey: rowKey}, preferred); err != nil {
			return nil, err
		}
	}
	if err := iter.Error(); err != nil {
		return nil, engineError("iterate", err)
	}
	if err := intervals.Close(); err != nil {
		return nil, err
	}
	for key, records := range th.tallies {
		if err := b.batch.Merge([]byte(key), records, nil); err != nil {
			return nil, fmt.Errorf("pebble: tally: %w", err)
		}
	}
	return th.deleted, nil
}

// checkThinning checks ThinRows' bounds: intervals of whole minutes that
// divide a day, so that every day starts one and a tally's minutes are
// an interval's, and from and to on their boundaries.
func checkThinning(partition string, from, to time.Time, every time.Duration) error {
	if err := store.ValidateKey(partition); err != nil {
		return err
	}
	switch {
	case !policy.ValidInterval(every):
		return fmt.Errorf("interval %s is not whole minutes dividing a day", every)
	case !policy.Interval(from, every).Equal(from) || !policy.Interval(to, every).Equal(to):
		return fmt.Errorf("[%s, %s) does not start and end on %s boundaries", from.Format(time.RFC3339), to.Format(time.RFC3339), every)
	case !from.Before(to):
		return fmt.Errorf("[%s, %s) is empty", from.Format(time.RFC3339), to.Format(time.RFC3339))
	}
	return nil
}

// thinRow is one row ThinRows read.
type thinRow struct {
	at     time.Time
	rowKey string
}

// thinner stages the deletion of all but the keeper of each interval the
// keeper rule (policy.Intervals) hands it.
type thinner struct {
	b         *purgeBatch
	own       *table
	partition string
	// prefix starts the keys of the partition's rows.
	prefix  []byte
	deleted []string
	// tallies are the removal records staged per tally key; day and
	// tallyKey are the last row's, formatted once per day.
	tallies  map[string][]byte
	day      time.Time
	tallyKey string
}

// thin stages the thinning of an interval's rows, newest first: one range
// deletion on each side of the keeper, since its rows are one key range.
func (th *thinner) thin(g []thinRow, keeper int) error {
	if keeper > 0 {
		if err := th.deleteRange(th.key(g[0]), th.key(g[keeper])); err != nil {
			return err
		}
	}
	if keeper < len(g)-1 {
		if err := th.deleteRange(append(th.key(g[keeper]), 0), append(th.key(g[len(g)-1]), 0)); err != nil {
			return err
		}
	}
	for i, r := range g {
		if i == keeper {
			continue
		}
		th.deleted = append(th.deleted, r.rowKey)
		th.tally(r.at)
	}
	return nil
}

// key is the row's key.
func (th *thinner) key(r thinRow) []byte { return append(bytes.Clone(th.prefix), r.rowKey...) }

// tally stages the removal record of a row captured at, as rowTally makes
// it, its tally key formatted once per day rather than once per row.
func (th *thinner) tally(at time.Time) {
	if day := at.Truncate(24 * time.Hour); th.tallyKey == "" || !day.Equal(th.day) {
		th.day, th.tallyKey = day, string(tallyKey(th.own.key, day, th.partition))
	}
	record := uint16(at.Hour()*60+at.Minute()) | removalBit
	th.tallies[th.tallyKey] = binary.BigEndian.AppendUint16(th.tallies[th.tallyKey], record)
}

func (th *thinner) deleteRange(lower, upper []byte) error {
	if err := th.b.batch.DeleteRange(lower, upper, nil); err != nil {
		return fmt.Errorf("pebble: delete range: %w", err)
	}
	th.b.tombstones++
	return nil
}
