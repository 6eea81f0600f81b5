package pebble

import (
	"context"
	"errors"

	pebbledb "github.com/cockroachdb/pebble/v2"
)

// PartitionEnds visits the table's partitions from from on, in partition
// key order, each with the row keys of its first and last rows, until visit
// returns false. A partition costs three seeks, however many rows it holds:
// the fleet views read a camera's newest and oldest image so (row keys are
// inverted capture ticks, so the first row is the newest), where a scan
// would read every image of every camera.
func (d *DB) PartitionEnds(ctx context.Context, table, from string, visit func(partitionKey, firstRowKey, lastRowKey string) (bool, error)) error {
	own, err := d.ownTable(table)
	if err != nil {
		return err
	}
	prefix := tablePrefix(own.key)
	iter, err := d.db.NewIterWithContext(ctx, &pebbledb.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return engineError("iterate", err)
	}
	defer iter.Close()
	visited := 0
	for valid := iter.SeekGE(partitionPrefix(own.key, from)); valid; {
		if visited++; visited%ctxCheckEvery == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		pk, first, err := decodeKey(own.key, iter.Key())
		if err != nil {
			return err
		}
		end := prefixEnd(partitionPrefix(own.key, pk))
		if !iter.SeekLT(end) {
			// The iterator's view is fixed: the row just read is there.
			return engineError("iterate", errors.Join(iter.Error(), errCorrupt))
		}
		_, last, err := decodeKey(own.key, iter.Key())
		if err != nil {
			return err
		}
		more, err := visit(pk, first, last)
		if err != nil || !more {
			return err
		}
		valid = iter.SeekGE(end)
	}
	if err := iter.Error(); err != nil {
		return engineError("iterate", err)
	}
	return ctx.Err()
}
