package retention

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
)

// maxTaskIDBytes bounds the camera ids of one task, so the task record stays
// far under the 64 KiB property limit whatever the ids' lengths.
const maxTaskIDBytes = 16 << 10

// expiredIndex is the scan of the index partitions that hold only expired
// rows: every capture minute before the boundary's. It is one range over
// partition keys, whatever the number of cameras; with sharded partition
// keys ("202601010000_3") it stays one range, since they sort before the
// next minute.
func expiredIndex(boundary time.Time) store.Scan {
	return store.Scan{Partitions: store.Range{To: store.MinutePartitionKey(boundary)}}
}

// expiredRows is the row range of a camera's expired primary rows.
func expiredRows(boundary time.Time) store.Range {
	return store.InvertedTicksRows(nil, &boundary)
}

// plan scans the expired index, groups the cameras it finds into tasks and
// sends each through the queue. After a crash it runs again from the start:
// cameras already in a recorded task are skipped, and the recorded tasks not
// yet done are sent again, since their first message may never have left.
func (e *Engine) plan(ctx context.Context, j *Job, kind images.Kind) error {
	_, index := e.repos[kind].Tables()
	existing, err := e.tasks.all(ctx, j.ID, kind)
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, t := range existing {
		for _, d := range t.Devices {
			seen[d.ID] = true
		}
		if !t.Done {
			if err := e.send(ctx, t); err != nil {
				return err
			}
		}
	}
	seq := len(existing)
	var group []*taskDevice
	groupBytes := 0
	flush := func() error {
		if len(group) == 0 {
			return nil
		}
		t := &task{JobID: j.ID, Kind: kind, Seq: seq, Devices: group}
		if err := e.tasks.create(ctx, t); err != nil {
			return err
		}
		if err := e.send(ctx, t); err != nil {
			return err
		}
		if _, err := e.updateJob(ctx, j.ID, func(j *Job) error {
			j.progress(kind).Counts.DevicesTotal += int64(len(group))
			return nil
		}); err != nil {
			return err
		}
		seq++
		group, groupBytes = nil, 0
		return nil
	}
	err = scanAll(ctx, index, expiredIndex(j.Boundary()), func(row store.Entity) error {
		device, _ := row.Properties[images.PropDeviceID].(string)
		if device == "" || seen[device] {
			return nil
		}
		seen[device] = true
		group = append(group, &taskDevice{ID: device})
		if groupBytes += len(device); len(group) >= e.opts.GroupSize || groupBytes >= maxTaskIDBytes {
			return flush()
		}
		return nil
	})
	if err != nil {
		return err
	}
	return flush()
}

func (e *Engine) send(ctx context.Context, t *task) error {
	body, err := json.Marshal(taskMessage{JobID: t.JobID, Kind: t.Kind, Seq: t.Seq})
	if err != nil {
		return fmt.Errorf("retention: encode message: %w", err)
	}
	if err := e.queue.Send(ctx, body); err != nil {
		return err
	}
	e.notify()
	return nil
}

// dryRun counts what a purge of kind would delete, without deleting.
func (e *Engine) dryRun(ctx context.Context, j *Job, kind images.Kind) error {
	primary, index := e.repos[kind].Tables()
	var c Counts
	seen := map[string]bool{}
	rows := expiredRows(j.Boundary())
	err := scanAll(ctx, index, expiredIndex(j.Boundary()), func(row store.Entity) error {
		c.IndexRows++
		device, _ := row.Properties[images.PropDeviceID].(string)
		if device == "" || seen[device] {
			return nil
		}
		seen[device] = true
		n, err := countRows(ctx, primary, device, rows)
		if err != nil {
			return err
		}
		c.DevicesTotal++
		c.DevicesDone++
		c.MetadataRows += n
		return nil
	})
	if err != nil {
		return err
	}
	_, err = e.updateJob(ctx, j.ID, func(j *Job) error {
		j.progress(kind).Counts = c
		return nil
	})
	return err
}

// scanAll calls visit for every entity of the scan, page by page.
func scanAll(ctx context.Context, t store.Table, s store.Scan, visit func(store.Entity) error) error {
	for {
		page, err := t.Scan(ctx, s)
		if err != nil {
			return err
		}
		for _, e := range page.Entities {
			if err := visit(e); err != nil {
				return err
			}
		}
		if page.Next == nil {
			return nil
		}
		s.Resume = page.Next
	}
}

// countRows counts the rows of one partition in a row range: by their keys
// alone where the backend can, else by reading them.
func countRows(ctx context.Context, t store.Table, partitionKey string, rows store.Range) (int64, error) {
	if c, ok := t.(store.Counter); ok {
		return c.CountRows(ctx, partitionKey, rows)
	}
	var n int64
	q := store.Query{PartitionKey: partitionKey, Rows: rows}
	for {
		page, err := t.Query(ctx, q)
		if err != nil {
			return 0, err
		}
		n += int64(len(page.Entities))
		if page.Next == nil {
			return n, nil
		}
		q.Resume = page.Next
	}
}
