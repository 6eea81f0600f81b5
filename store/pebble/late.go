package pebble

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/metadatad/metadatad/store"
)

// Late writes. A purge's sections read each camera's tallies once, in
// camera order, and its last section must then catch what was written
// since into the days it purges (an old image uploaded late, a new
// camera's backlog), or its range deletion of the index would take the
// index rows of rows it never saw. Reading every camera's tallies again in
// that one exclusive batch was its largest part at 10,000 cameras, and a
// spike for the requests; yet on a live store almost no write lands there.
// So the store records which partitions such writes touch while a purge
// watches (store.Purger.WatchLate), and the last section reads those.
//
// A write is recorded once it holds its place at the gate and before it
// commits: an Exclusive waits for it, so a stage that reads the record
// finds every late write committed before it (and, at worst, one still
// waiting behind it, which it reads for nothing).

// maxLatePartitions bounds a watch: past it the watch stops recording and
// says so, and the last section reads every partition, which is then no
// dearer than a seek for each.
const maxLatePartitions = 4096

// lateWatch records the partitions of one table written with a row
// captured before before.
type lateWatch struct {
	table  string // the table's key
	before time.Time

	mu    sync.Mutex
	parts map[string]struct{}
	full  bool
}

// Late returns the partitions recorded so far, sorted, or all when there
// were more than it keeps.
func (w *lateWatch) Late() (partitions []string, all bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.full {
		return nil, true
	}
	partitions = make([]string, 0, len(w.parts))
	for p := range w.parts {
		partitions = append(partitions, p)
	}
	slices.Sort(partitions)
	return partitions, false
}

func (w *lateWatch) add(partition string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.full {
		return
	}
	if _, ok := w.parts[partition]; !ok && len(w.parts) >= maxLatePartitions {
		w.full, w.parts = true, nil
		return
	}
	w.parts[partition] = struct{}{}
}

// WatchLate starts recording the partitions of the tallied table that
// writes touch with a row captured before before, until stop.
func (d *DB) WatchLate(table string, before time.Time) (store.LateWrites, func(), error) {
	own, err := d.ownTable(table)
	if err != nil {
		return nil, nil, err
	}
	if d.tallied(own.key) == nil {
		return nil, nil, fmt.Errorf("pebble: watch of %s: the table is not tallied", own.name)
	}
	w := &lateWatch{table: own.key, before: before, parts: map[string]struct{}{}}
	d.lateMu.Lock()
	d.late.Store(ptr(append(slices.Clone(d.watches()), w)))
	d.lateMu.Unlock()
	stop := func() {
		d.lateMu.Lock()
		defer d.lateMu.Unlock()
		d.late.Store(ptr(slices.DeleteFunc(slices.Clone(d.watches()), func(x *lateWatch) bool { return x == w })))
	}
	return w, stop, nil
}

func (d *DB) watches() []*lateWatch {
	if p := d.late.Load(); p != nil {
		return *p
	}
	return nil
}

// noteLate records the writes' late partitions in every watch. With no
// watch, the usual case, it costs an atomic load.
func (d *DB) noteLate(writes []write) {
	watches := d.watches()
	if len(watches) == 0 {
		return
	}
	for _, w := range watches {
		for _, wr := range writes {
			if wr.table != w.table {
				continue
			}
			at, err := store.TimeFromInvertedTicksRowKey(wr.op.Entity.RowKey)
			if err != nil || at.Before(w.before) {
				w.add(wr.op.Entity.PartitionKey) // untallied keys: read, to be sure
			}
		}
	}
}

func ptr[T any](v T) *T { return &v }
