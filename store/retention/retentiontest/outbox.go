package retentiontest

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/pebble"
	"github.com/metadatad/metadatad/store/retention"
)

// deletedAfter reads every deleted image of f's outbox after token.
func deletedAfter(t *testing.T, f *Fixture, token string) []retention.DeletedImage {
	t.Helper()
	var out []retention.DeletedImage
	for {
		page, err := f.Engine.DeletedImages(t.Context(), token, 1000)
		if err != nil {
			t.Fatalf("deleted images after %q: %v", token, err)
		}
		if len(page) == 0 {
			return out
		}
		out, token = append(out, page...), page[len(page)-1].Token
	}
}

// requireAhead fails unless reading after token is refused as ahead of
// the outbox, naming end as where to resume.
func requireAhead(t *testing.T, f *Fixture, token, end string) {
	t.Helper()
	rows, err := f.Engine.DeletedImages(t.Context(), token, 10)
	var ahead *retention.AheadError
	if !errors.As(err, &ahead) || !errors.Is(err, retention.ErrOutboxAhead) {
		t.Errorf("reading after %q: %d rows, %v; want ErrOutboxAhead", token, len(rows), err)
		return
	}
	if ahead.End != end {
		t.Errorf("reading after %q: resume at %q, want %q", token, ahead.End, end)
	}
}

// testOutboxRefusesAPositionAheadOfIt: a token past the outbox's end (one
// more than it gave out, or far beyond) is refused with its end rather
// than waited on, which would skip the records up to it once they came;
// a token of the other design's form is not a token. On every engine.
func testOutboxRefusesAPositionAheadOfIt(t *testing.T, ts *suite) {
	t.Parallel() // independent: stores and engines of its own
	ts.each(t, func(t *testing.T, open func(*testing.T, Options) *Fixture) {
		o, now := thinOptions()
		o.Outbox = true
		f := open(t, o)
		f.Run(t)
		sc := setUpThinning(t, f, now)
		f.Purge(t, retention.StartRequest{Kinds: thinKinds, UsePolicies: true})
		all := deletedAfter(t, f, "")
		if int64(len(all)) != sc.deleted() {
			t.Fatalf("outbox: %d rows, want the %d deleted", len(all), sc.deleted())
		}
		end := all[len(all)-1].Token
		var ahead []string
		var bad string
		if f.QueueDesign() {
			// end is the next seal's start, "n.".
			n, _ := strconv.Atoi(strings.TrimSuffix(end, "."))
			ahead = []string{strconv.Itoa(n+1) + ".", end + "0_cam-a_x", "1000000."}
			bad = "1000000"
		} else {
			n, _ := strconv.Atoi(end)
			ahead = []string{strconv.Itoa(n + 1), "1000000"}
			bad = "9."
		}
		for _, tok := range ahead {
			requireAhead(t, f, tok, end)
		}
		if _, err := f.Engine.DeletedImages(t.Context(), bad, 10); !errors.Is(err, retention.ErrBadResumeToken) {
			t.Errorf("reading after %q: %v, want ErrBadResumeToken", bad, err)
		}
		if rows, err := f.Engine.DeletedImages(t.Context(), end, 10); err != nil || len(rows) != 0 {
			t.Errorf("reading after the end: %d rows, %v; want none, no error", len(rows), err)
		}
	})
}

// backupOf is f's embedded store as metadatad backup copies it, restored
// into a filesystem of its own: a checkpoint, which flushes and syncs the
// log first, so that it holds every write a reader has seen. (A crash's
// copy holds only what was synced, and the store shows a write before the
// sync of its log ends.)
func backupOf(t *testing.T, f *Fixture) *vfs.MemFS {
	t.Helper()
	const dir = "backup"
	if err := f.Base.(*pebble.DB).Checkpoint(dir); err != nil {
		t.Fatal(err)
	}
	names, err := f.FS.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	fs := vfs.NewCrashableMem()
	if err := fs.MkdirAll("db", 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if err := vfs.CopyAcrossFS(f.FS, f.FS.PathJoin(dir, name), fs, fs.PathJoin("db", name)); err != nil {
			t.Fatal(err)
		}
	}
	return fs
}

// testARestoredOutboxRefusesThePositionsItLost: a backup taken, records
// added and read, the older backup restored (MarkOutboxRestored, as
// metadatad restore does): the newer token is refused, naming the
// backup's end, also once the restored store has deleted more images than
// the lost ones, and the backup's end reads exactly the new records. The
// embedded store's: no command restores an Azure store.
func testARestoredOutboxRefusesThePositionsItLost(t *testing.T, ts *suite) {
	o, now := thinOptions()
	o.Outbox = true
	f := ts.open(t, o)
	f.Run(t)
	setUpThinning(t, f, now)
	f.Purge(t, retention.StartRequest{Kinds: thinKinds, UsePolicies: true})
	backed := deletedAfter(t, f, "")
	backupEnd := backed[len(backed)-1].Token
	backup := backupOf(t, f)

	f.SeedThinning(t, now, images.Single, "cam-lost")
	f.Purge(t, retention.StartRequest{Kinds: thinKinds, UsePolicies: true})
	lost := deletedAfter(t, f, backupEnd)
	if len(lost) == 0 {
		t.Fatal("the purge after the backup deleted nothing")
	}
	newer := lost[len(lost)-1].Token
	f.Stop()

	g := f.Reopen(t, backup)
	if err := g.Engine.MarkOutboxRestored(t.Context()); err != nil {
		t.Fatal(err)
	}
	g.Run(t)
	requireAhead(t, g, newer, backupEnd)
	// More deletions than the lost ones: without the mark their positions
	// would reach the newer token's.
	g.SeedThinning(t, now, images.Single, "cam-new-1", "cam-new-2", "cam-new-3")
	g.Purge(t, retention.StartRequest{Kinds: thinKinds, UsePolicies: true})
	requireAhead(t, g, newer, backupEnd)
	fresh := deletedAfter(t, g, backupEnd)
	if len(fresh) <= len(lost) {
		t.Fatalf("%d deletions after the restore, want more than the %d lost", len(fresh), len(lost))
	}
	for _, d := range fresh {
		if !strings.HasPrefix(d.CameraID, "cam-new-") {
			t.Errorf("after the backup's end: %s's image, want only the new cameras'", d.CameraID)
		}
	}
	if all := deletedAfter(t, g, ""); len(all) != len(backed)+len(fresh) {
		t.Errorf("%d deletions in all, want the backup's %d and the %d new", len(all), len(backed), len(fresh))
	}
}

// testAStalledDeliveryIsFencedByItsJobsEnd: a queue design's delivery that
// wrote a batch's outbox rows pending, then stalled while its job's end
// reconciled them (their primary rows still there, so dropped as not
// deleted), deletes nothing when it wakes: every image the purge deleted is
// named once and no kept one is. Without the reconciliation's fence the
// stalled batch's rows went, never named.
func testAStalledDeliveryIsFencedByItsJobsEnd(t *testing.T, ts *suite) {
	t.Parallel() // a store of its own
	o, now := thinOptions()
	o.Outbox, o.Workers = true, 1
	f := ts.open(t, o)
	sc := setUpThinning(t, f, now)
	var batches atomic.Int32
	f.Hooks.Delete = func(job string, _ []store.Entity) {
		if batches.Add(1) == 2 { // the first batch deleted and named
			if err := f.Hooks.EndOutbox(context.Background(), job); err != nil {
				t.Error(err)
			}
		}
	}
	f.Run(t)
	j := f.Purge(t, retention.StartRequest{Kinds: thinKinds, UsePolicies: true})
	if batches.Load() < 2 {
		t.Fatalf("%d delete batches: the test needs a second to stall", batches.Load())
	}
	t.Logf("job %s: %s, counts %+v", j.ID, j.State, j.Totals())
	sc.checkOutbox(t, f)
}

// testARowRewrittenMidBatchIsCountedOnce: with the outbox, the queue
// design deletes a batch only at the ETags it read, so a row a retried
// create (or any write) writes again between the read and the delete stays in that batch
// and goes with the next read of the range: it is deleted, named and
// counted once, not once per batch that met it.
func testARowRewrittenMidBatchIsCountedOnce(t *testing.T, ts *suite) {
	t.Parallel() // a store of its own
	o := quickOptions()
	o.Outbox, o.Workers = true, 1
	f := ts.open(t, o)
	kind := images.Single
	f.SeedKinds(t, 2, []images.Kind{kind})
	boundary := base.Add(2 * time.Minute) // the start of the cutoff's minute
	before := f.Census(t, kind, boundary)
	primary, _ := f.Repo(kind).Tables()
	var rewrites atomic.Int32
	f.Hooks.Delete = func(_ string, rows []store.Entity) {
		if rewrites.Add(1) == 1 { // a write of the row meanwhile (a backfill, a retried create)
			row := store.Entity{PartitionKey: rows[0].PartitionKey, RowKey: rows[0].RowKey, Properties: store.Properties{"Rewritten": true}}
			if _, err := primary.Upsert(context.Background(), row, store.Merge); err != nil {
				t.Error(err)
			}
		}
	}
	f.Run(t)
	j := f.Purge(t, retention.StartRequest{Kinds: []images.Kind{kind}, Cutoff: cutoff})
	if j.State != retention.Succeeded || rewrites.Load() < 2 {
		t.Fatalf("job %s: %s (%s) after %d batches; want it done, and a batch after the rewrite", j.ID, j.State, j.Error, rewrites.Load())
	}
	after := f.Census(t, kind, boundary)
	got := j.Totals()
	if after.PrimaryOld != 0 || got.MetadataRows != before.PrimaryOld || got.MetadataRowsLowerBound {
		t.Errorf("counted %d rows (lower bound %v), %d expired, %d left: want every expired row gone and counted once",
			got.MetadataRows, got.MetadataRowsLowerBound, before.PrimaryOld, after.PrimaryOld)
	}
}

// testOutboxRetiresWithTheJobs: the outbox names each image a purge with
// thinning deleted once; its rows go once older than the job retention,
// and a reader whose position they were after is told so rather than
// skipping them unawares. On every engine: the queue design's outbox is
// its jobs' sealed ones (outboxseal.go).
func testOutboxRetiresWithTheJobs(t *testing.T, ts *suite) {
	t.Parallel() // independent: stores and engines of its own
	ts.each(t, outboxRetiresWithTheJobs)
}

func outboxRetiresWithTheJobs(t *testing.T, open func(*testing.T, Options) *Fixture) {
	o, now := thinOptions()
	var skew atomic.Int64
	clock := o.Now
	o.Now = func() time.Time { return clock().Add(time.Duration(skew.Load())) }
	o.Outbox, o.JobRetention = true, 24*time.Hour
	f := open(t, o)
	f.Run(t)
	sc := setUpThinning(t, f, now)
	sc.checkCounts(t, f.Purge(t, retention.StartRequest{Kinds: thinKinds, UsePolicies: true}), f.QueueDesign())
	sc.checkOutbox(t, f)
	all, err := f.Engine.DeletedImages(t.Context(), "", 1000)
	if err != nil || int64(len(all)) != sc.deleted() {
		t.Fatalf("outbox: %d rows, %v; want the %d deleted", len(all), err, sc.deleted())
	}
	// A second purge deletes nothing: the outbox has nothing more.
	f.Purge(t, retention.StartRequest{Kinds: thinKinds, UsePolicies: true})
	if more, err := f.Engine.DeletedImages(t.Context(), all[len(all)-1].Token, 10); err != nil || len(more) != 0 {
		t.Errorf("after a purge that deleted nothing: %v, %v; want nothing", more, err)
	}
	first, last := all[0].Token, all[len(all)-1].Token
	skew.Store(int64(48 * time.Hour))
	if _, err := f.Engine.RetireJobs(t.Context()); err != nil {
		t.Fatal(err)
	}
	if left, err := f.Engine.DeletedImages(t.Context(), "", 1000); err != nil || len(left) != 0 {
		t.Errorf("after retirement: %d rows, %v; want none", len(left), err)
	}
	if _, err := f.Engine.DeletedImages(t.Context(), first, 10); !errors.Is(err, retention.ErrOutboxTrimmed) {
		t.Errorf("reading after the first of %d retired: %v, want ErrOutboxTrimmed", len(all), err)
	}
	if rows, err := f.Engine.DeletedImages(t.Context(), last, 10); err != nil || len(rows) != 0 {
		t.Errorf("reading after the last retired position: %v, %v; want nothing, no error", rows, err)
	}
	if _, err := f.Engine.DeletedImages(t.Context(), "x", 10); !errors.Is(err, retention.ErrBadResumeToken) {
		t.Errorf("reading after a token no outbox makes: %v, want ErrBadResumeToken", err)
	}
}
