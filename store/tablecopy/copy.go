package tablecopy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/metadatad/metadatad/store"
)

// ProgressTable is the table of the target where copies record how far
// they got, one row per source and table.
const ProgressTable = "MetadatadCopyProgress"

// Defaults of Options.
const (
	DefaultPageSize     = 1000
	DefaultBatchSize    = 100
	DefaultVerifySample = 100
)

// ErrMismatch reports a target that does not hold what the source holds
// after the copy.
var ErrMismatch = errors.New("tablecopy: target differs from source")

// Options configures Run.
type Options struct {
	// From and To are the source and target backends; required.
	From, To store.Backend
	// Source names the source (e.g. "embedded:/var/lib/metadatad"), so the
	// progress recorded in To is of this source only; required.
	Source string
	// Tables are copied in this order; list each index table before its
	// primary table.
	Tables []string
	// Restart ignores recorded progress and copies every row again.
	Restart bool
	// PageSize is how many rows one read of the source returns and one
	// progress record covers; default DefaultPageSize.
	PageSize int
	// BatchSize is how many rows of one partition one write carries, at
	// most 100 (Azure's limit); default DefaultBatchSize.
	BatchSize int
	// VerifySample is how many rows of each table are read back from the
	// target and compared at the end; default DefaultVerifySample.
	VerifySample int
	// Progress, if set, is told the rows copied so far after every page.
	Progress func(table string, rows int64)
}

func (o Options) withDefaults() Options {
	if o.PageSize <= 0 {
		o.PageSize = DefaultPageSize
	}
	if o.BatchSize <= 0 || o.BatchSize > store.MaxBatchOps {
		o.BatchSize = DefaultBatchSize
	}
	if o.VerifySample <= 0 {
		o.VerifySample = DefaultVerifySample
	}
	return o
}

// TableReport is the outcome of one table's copy.
type TableReport struct {
	Table string
	// Rows is how many rows this run copied.
	Rows int64
	// Resumed says the run started from a recorded position; AlreadyDone
	// that the table had been copied whole by an earlier run.
	Resumed, AlreadyDone bool
	// SourceRows and TargetRows are the counts the verification found.
	SourceRows, TargetRows int64
	// Sampled is how many rows were compared field by field.
	Sampled int
	// Mismatches describes what verification found different.
	Mismatches []string
	Duration   time.Duration
}

// Report is the outcome of a copy.
type Report struct {
	Tables []TableReport
	// Rows is the rows copied by this run, in all tables.
	Rows int64
	// Reads and Writes count the storage operations of the copy proper
	// (pages read, batches and progress records written), not those of the
	// verification.
	Reads, Writes int64
	Duration      time.Duration
}

// Run copies the tables and verifies them. It returns the report so far
// with an error wrapping ErrMismatch when verification finds a difference,
// or the error that stopped the copy; run it again to resume.
func Run(ctx context.Context, opts Options) (*Report, error) {
	opts = opts.withDefaults()
	if opts.From == nil || opts.To == nil || opts.Source == "" {
		return nil, errors.New("tablecopy: Options needs From, To and Source")
	}
	progress, err := opts.To.Table(ctx, ProgressTable)
	if err != nil {
		return nil, err
	}
	c := &copier{opts: opts, progress: progress, sourceKey: sourceKey(opts.Source)}
	start := time.Now()
	report := &Report{}
	defer func() {
		report.Reads, report.Writes, report.Duration = c.reads.Load(), c.writes.Load(), time.Since(start)
	}()
	for _, name := range opts.Tables {
		tr, err := c.copyTable(ctx, name)
		report.Rows += tr.Rows
		report.Tables = append(report.Tables, tr)
		if err != nil {
			return report, fmt.Errorf("tablecopy: table %s: %w", name, err)
		}
	}
	var mismatched []string
	for i := range report.Tables {
		tr := &report.Tables[i]
		if err := c.verify(ctx, tr); err != nil {
			return report, fmt.Errorf("tablecopy: verifying %s: %w", tr.Table, err)
		}
		if len(tr.Mismatches) > 0 {
			mismatched = append(mismatched, tr.Table)
		}
	}
	if len(mismatched) > 0 {
		return report, fmt.Errorf("%w: tables %v", ErrMismatch, mismatched)
	}
	return report, nil
}

// sourceKey is the progress table's partition of a source: a hash, since
// a source's name may hold characters keys may not.
func sourceKey(source string) string {
	sum := sha256.Sum256([]byte(source))
	return hex.EncodeToString(sum[:16])
}

type copier struct {
	opts          Options
	progress      store.Table
	sourceKey     string
	reads, writes atomic.Int64
}

// position is how far a table's copy got.
type position struct {
	cursor *store.Cursor
	rows   int64
	done   bool
}

func (c *copier) loadPosition(ctx context.Context, table string) (position, error) {
	e, err := c.progress.Get(ctx, c.sourceKey, table)
	if errors.Is(err, store.ErrNotFound) {
		return position{}, nil
	}
	if err != nil {
		return position{}, err
	}
	p := position{done: e.Properties["Done"] == true}
	p.rows, _ = e.Properties["Rows"].(int64)
	if pk, ok := e.Properties["CursorPartitionKey"].(string); ok {
		rk, _ := e.Properties["CursorRowKey"].(string)
		p.cursor = &store.Cursor{PartitionKey: pk, RowKey: rk}
	}
	return p, nil
}

func (c *copier) savePosition(ctx context.Context, table string, p position) error {
	props := store.Properties{"Source": c.opts.Source, "Rows": p.rows, "Done": p.done}
	if p.cursor != nil {
		props["CursorPartitionKey"], props["CursorRowKey"] = p.cursor.PartitionKey, p.cursor.RowKey
	}
	c.writes.Add(1)
	_, err := c.progress.Upsert(ctx, store.Entity{PartitionKey: c.sourceKey, RowKey: table, Properties: props}, store.Replace)
	return err
}

// copyTable copies one table from its recorded position.
func (c *copier) copyTable(ctx context.Context, name string) (TableReport, error) {
	tr := TableReport{Table: name}
	start := time.Now()
	defer func() { tr.Duration = time.Since(start) }()
	src, err := c.opts.From.Table(ctx, name)
	if err != nil {
		return tr, err
	}
	dst, err := c.opts.To.Table(ctx, name)
	if err != nil {
		return tr, err
	}
	var pos position
	if !c.opts.Restart {
		if pos, err = c.loadPosition(ctx, name); err != nil {
			return tr, err
		}
	}
	if pos.done {
		tr.AlreadyDone = true
		return tr, nil
	}
	tr.Resumed = pos.cursor != nil
	for {
		c.reads.Add(1)
		page, err := src.Scan(ctx, store.Scan{Limit: c.opts.PageSize, Resume: pos.cursor})
		if err != nil {
			return tr, err
		}
		if err := c.writePage(ctx, dst, page.Entities); err != nil {
			return tr, err
		}
		tr.Rows += int64(len(page.Entities))
		pos.rows += int64(len(page.Entities))
		pos.cursor, pos.done = page.Next, page.Next == nil
		if err := c.savePosition(ctx, name, pos); err != nil {
			return tr, err
		}
		if c.opts.Progress != nil {
			c.opts.Progress(name, tr.Rows)
		}
		if pos.done {
			return tr, nil
		}
	}
}

// writePage upserts rows (in key order) in batches of one partition,
// within the batch limits.
func (c *copier) writePage(ctx context.Context, dst store.Table, rows []store.Entity) error {
	for start := 0; start < len(rows); {
		end, size := start+1, store.EntitySize(rows[start])
		for end < len(rows) && end-start < c.opts.BatchSize && rows[end].PartitionKey == rows[start].PartitionKey &&
			size+store.EntitySize(rows[end]) <= store.MaxBatchBytes/2 {
			size += store.EntitySize(rows[end])
			end++
		}
		ops := make([]store.Op, end-start)
		for i, e := range rows[start:end] {
			ops[i] = store.Op{Kind: store.OpUpsert, Mode: store.Replace,
				Entity: store.Entity{PartitionKey: e.PartitionKey, RowKey: e.RowKey, Properties: e.Properties}}
		}
		c.writes.Add(1)
		if err := dst.Batch(ctx, ops); err != nil {
			return err
		}
		start = end
	}
	return nil
}

// verify counts the rows of the table on both sides and compares a
// random sample of the source's rows with the target's.
func (c *copier) verify(ctx context.Context, tr *TableReport) error {
	src, err := c.opts.From.Table(ctx, tr.Table)
	if err != nil {
		return err
	}
	dst, err := c.opts.To.Table(ctx, tr.Table)
	if err != nil {
		return err
	}
	var sample []store.Entity
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0))
	if tr.SourceRows, err = scanAll(ctx, src, func(e store.Entity, n int64) {
		// Reservoir sampling: every row has the same chance to be compared.
		if len(sample) < c.opts.VerifySample {
			sample = append(sample, e)
		} else if j := rng.Int64N(n); j < int64(len(sample)) {
			sample[j] = e
		}
	}); err != nil {
		return err
	}
	if tr.TargetRows, err = scanAll(ctx, dst, nil); err != nil {
		return err
	}
	if tr.SourceRows != tr.TargetRows {
		tr.Mismatches = append(tr.Mismatches, fmt.Sprintf("%d rows in the source, %d in the target", tr.SourceRows, tr.TargetRows))
	}
	for _, want := range sample {
		got, err := dst.Get(ctx, want.PartitionKey, want.RowKey)
		switch {
		case errors.Is(err, store.ErrNotFound):
			tr.Mismatches = append(tr.Mismatches, fmt.Sprintf("row %s/%s is missing", want.PartitionKey, want.RowKey))
		case err != nil:
			return err
		case !store.EqualProperties(got.Properties, want.Properties):
			tr.Mismatches = append(tr.Mismatches, fmt.Sprintf("row %s/%s differs", want.PartitionKey, want.RowKey))
		}
	}
	tr.Sampled = len(sample)
	return nil
}

// scanAll reads every row of t, calling each (if set) with the row and its
// 1-based position, and returns the count.
func scanAll(ctx context.Context, t store.Table, each func(e store.Entity, n int64)) (int64, error) {
	var n int64
	scan := store.Scan{}
	for {
		page, err := t.Scan(ctx, scan)
		if err != nil {
			return n, err
		}
		for _, e := range page.Entities {
			n++
			if each != nil {
				each(e, n)
			}
		}
		if page.Next == nil {
			return n, nil
		}
		scan.Resume = page.Next
	}
}
