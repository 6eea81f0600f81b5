package embedded

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention"
)

// outboxSectionRows bounds the rows of a section that fills the outbox: it
// reads each deleted row and writes one more, so its batch grows with them.
const outboxSectionRows = 20_000

// Outbox rows: the images in partition outboxPart keyed by sequence
// (retention.DeletedImageProperties), the next sequence and the retired one
// in outboxMetaPart.
const (
	outboxPart     = "d"
	outboxMetaPart = "m"
	outboxNextRow  = "next"
	outboxTrimRow  = "trimmed"
)

// durability keeps the outbox's readers to the records on disk. The
// store makes a write visible as soon as it is applied, before the sync of
// its log ends (Pebble publishes a batch, then waits for the sync; the
// write returns after both), and a reader may act on a record at once: the
// blob deleter deletes its blob. A record that a crash then took back
// would be a blob deleted for a row that comes back, and a position that a
// later record reuses after the reader passed it. So a read that finds a
// record past the end of the last write of the outbox that returned, while
// one commits, waits for it to return: only its sync is left, since its
// records are visible.
type durability struct {
	mu      sync.Mutex
	writing int    // the outbox writes committing
	end     uint64 // the outbox's next sequence after the last that returned
	// returned is closed, and replaced, as each write returns.
	returned chan struct{}
}

// begin marks a write of the outbox as committing, before it is staged.
func (d *durability) begin() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.writing++
}

// done ends a write that begin marked; next is the outbox's next sequence
// it wrote, 0 if it wrote none or failed.
func (d *durability) done(next uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.end = max(d.end, next)
	d.writing--
	close(d.returned)
	d.returned = make(chan struct{})
}

// await returns once the record at position seq, which a read found, is
// on disk: the log holds every write before the last one that returned,
// synced.
func (d *durability) await(ctx context.Context, seq uint64) error {
	for {
		d.mu.Lock()
		ready, returned := d.writing == 0 || seq < d.end, d.returned
		d.mu.Unlock()
		if ready {
			return nil
		}
		select {
		case <-returned:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// startDurability reads the outbox's next sequence as a driver starts,
// before any write of its own: what a store holds as it opens is on disk.
func startDurability(ctx context.Context, outbox store.Table) (*durability, error) {
	d := &durability{returned: make(chan struct{})}
	if outbox == nil {
		return d, nil
	}
	switch e, err := outbox.Get(ctx, outboxMetaPart, outboxNextRow); {
	case err == nil:
		d.end = retention.SeqOf(e)
	case !errors.Is(err, store.ErrNotFound):
		return nil, err
	}
	return d, nil
}

// outboxWriter stages one section's outbox rows in its batch.
type outboxWriter struct {
	table store.Table
	b     store.PurgeBatch
	job   string
	kind  images.Kind
	at    time.Time
	next  uint64 // 0 until read
	wrote bool
}

// add stages the outbox row of a primary row the section deletes.
func (w *outboxWriter) add(ctx context.Context, camera string, row store.Entity) error {
	if w.next == 0 {
		e, err := w.table.Get(ctx, outboxMetaPart, outboxNextRow)
		switch {
		case errors.Is(err, store.ErrNotFound):
			w.next = 1
		case err != nil:
			return err
		default:
			w.next = max(retention.SeqOf(e), 1)
		}
	}
	rec, ok := outboxRow(w.next, w.kind, camera, row, w.job, w.at)
	if !ok {
		return nil // not an image's row: never tallied, never deleted by range
	}
	if _, err := w.b.Put(w.table.Name(), rec); err != nil {
		return err
	}
	w.next++
	w.wrote = true
	return nil
}

// outboxRow is the outbox row at position seq naming the deleted primary
// row of camera; false if the row is not an image's.
func outboxRow(seq uint64, kind images.Kind, camera string, row store.Entity, job string, at time.Time) (store.Entity, bool) {
	captured, err := store.TimeFromInvertedTicksRowKey(row.RowKey)
	if err != nil {
		return store.Entity{}, false
	}
	blob, _ := row.Properties[images.PropBlobURI].(string)
	return store.Entity{PartitionKey: outboxPart, RowKey: retention.SeqKey(seq),
		Properties: retention.DeletedImageProperties(retention.DeletedImage{Kind: kind, CameraID: camera, CapturedAt: captured,
			BlobURI: blob, JobID: job, DeletedAt: at})}, true
}

// finish stages the next sequence number, if the section wrote any row.
func (w *outboxWriter) finish() error {
	if !w.wrote {
		return nil
	}
	_, err := w.b.Put(w.table.Name(), store.Entity{PartitionKey: outboxMetaPart, RowKey: outboxNextRow,
		Properties: retention.SeqProperties(w.next)})
	return err
}

// committed is the outbox's next sequence after w's section, whose
// commit ended with err: 0 if it failed or wrote no record (w nil).
func (w *outboxWriter) committed(err error) uint64 {
	if w == nil || err != nil || !w.wrote {
		return 0
	}
	return w.next
}

// DeletedImages reads the outbox after a position: the records are in
// the order of their sequence, given in the sections' batches.
func (d *driver) DeletedImages(ctx context.Context, after string, limit int) ([]retention.DeletedImage, error) {
	e := d.env
	var pos uint64
	if after != "" {
		pos, _ = strconv.ParseUint(after, 10, 64)
	}
	if pos > 0 {
		if err := d.checkPosition(ctx, pos); err != nil {
			return nil, err
		}
	}
	page, err := e.Outbox().Query(ctx, store.Query{PartitionKey: outboxPart,
		Rows: store.Range{From: retention.SeqKey(pos + 1)}, Limit: min(max(limit, 1), store.MaxPageSize)})
	if err != nil {
		return nil, err
	}
	out := make([]retention.DeletedImage, 0, len(page.Entities))
	for _, r := range page.Entities {
		seq, err := strconv.ParseUint(r.RowKey, 16, 64)
		if err != nil {
			continue
		}
		img := retention.DeletedImageFrom(r)
		img.Seq, img.Token = seq, strconv.FormatUint(seq, 10)
		out = append(out, img)
	}
	if len(out) > 0 {
		if err := d.durable.await(ctx, out[len(out)-1].Seq); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// checkPosition reports whether the embedded outbox can be read after pos:
// retention.ErrOutboxTrimmed if rows after it were retired, an *retention.AheadError if the
// outbox never gave it out (past its next sequence, or in the positions a
// restore left behind).
func (d *driver) checkPosition(ctx context.Context, pos uint64) error {
	e := d.env
	meta, err := e.Outbox().Query(ctx, store.Query{PartitionKey: outboxMetaPart})
	if err != nil {
		return err
	}
	next := uint64(1)
	for _, r := range meta.Entities {
		switch n := retention.SeqOf(r); {
		case r.RowKey == outboxNextRow:
			next = max(n, 1)
		case r.RowKey == outboxTrimRow && pos+1 < n:
			return fmt.Errorf("%w: position %d, retired through %d", retention.ErrOutboxTrimmed, pos, n-1)
		case strings.HasPrefix(r.RowKey, outboxRestoredRow):
			from, err := strconv.ParseUint(strings.TrimPrefix(r.RowKey, outboxRestoredRow), 16, 64)
			if err == nil && pos >= from && pos < n {
				return &retention.AheadError{Token: strconv.FormatUint(pos, 10), End: strconv.FormatUint(from-1, 10)}
			}
		}
	}
	if pos >= next {
		return &retention.AheadError{Token: strconv.FormatUint(pos, 10), End: strconv.FormatUint(next-1, 10)}
	}
	return nil
}

// outboxRestoredRow + retention.SeqKey(the backup's next sequence), in
// outboxMetaPart, records a restore: its Seq (SeqOf) is the next sequence the
// restore set.
const outboxRestoredRow = "restored-"

// outboxRestoreGap is how far a restore moves the embedded outbox's next
// sequence: past every position the lost history can have given out, as
// long as it recorded fewer deletions than this after the backup.
const outboxRestoreGap = 1 << 32

func (d *driver) MarkOutboxRestored(ctx context.Context) error {
	e := d.env
	next := uint64(1)
	switch r, err := e.Outbox().Get(ctx, outboxMetaPart, outboxNextRow); {
	case err == nil:
		next = max(retention.SeqOf(r), 1)
	case !errors.Is(err, store.ErrNotFound):
		return err
	}
	moved := next + outboxRestoreGap
	return e.Outbox().Batch(ctx, []store.Op{
		{Kind: store.OpUpsert, Mode: store.Replace, Entity: store.Entity{PartitionKey: outboxMetaPart, RowKey: outboxRestoredRow + retention.SeqKey(next),
			Properties: retention.SeqProperties(moved)}},
		{Kind: store.OpUpsert, Mode: store.Replace, Entity: store.Entity{PartitionKey: outboxMetaPart, RowKey: outboxNextRow,
			Properties: retention.SeqProperties(moved)}},
	})
}

func (d *driver) CheckResumeToken(tok string) error {
	if _, err := strconv.ParseUint(tok, 10, 64); err != nil {
		return fmt.Errorf("%w: %q", retention.ErrBadResumeToken, tok)
	}
	return nil
}

// JobKeepsOutbox is false: the sections write the outbox in their
// batches, with no outbox of each job's to seal.
func (d *driver) JobKeepsOutbox(bool) bool { return false }

func (d *driver) SealJobOutbox(context.Context, string) error { return nil }

func (d *driver) RetireOutbox(ctx context.Context, cutoff time.Time) (int, error) {
	e := d.env
	n := 0
	for {
		page, err := e.Outbox().Query(ctx, store.Query{PartitionKey: outboxPart, Limit: store.MaxBatchOps})
		if err != nil {
			return n, err
		}
		var ops []store.Op
		var last uint64
		for _, r := range page.Entities {
			if !retention.DeletedImageFrom(r).DeletedAt.Before(cutoff) {
				break
			}
			ops = append(ops, store.Op{Kind: store.OpDelete, Entity: store.Entity{PartitionKey: outboxPart, RowKey: r.RowKey}})
			last, _ = strconv.ParseUint(r.RowKey, 16, 64)
		}
		if len(ops) == 0 {
			return n, nil
		}
		// The retired position first: a reader never finds a gap unnamed.
		if _, err := e.Outbox().Upsert(ctx, store.Entity{PartitionKey: outboxMetaPart, RowKey: outboxTrimRow,
			Properties: retention.SeqProperties(last + 1)}, store.Replace); err != nil {
			return n, err
		}
		if err := store.BatchDeletes(ctx, e.Outbox(), ops, nil); err != nil {
			return n, err
		}
		n += len(ops)
		if len(ops) < len(page.Entities) || page.Next == nil {
			return n, nil
		}
	}
}
