package retentiontest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention"
	"github.com/metadatad/metadatad/store/retention/policy"
)

// The thinning fixture: cameras with an image every 20 minutes in the
// windows of thinWindows, between 6 days before the engine's clock and 1
// day before it; the clock starts 7 minutes past an hour, so no interval
// boundary of its tiers moves while a test runs.
const thinEvery = 20 * time.Minute

// thinWindows are the ages, in hours, around which the fixture has images:
// 4 hours across each age where a rule of setUpThinning changes (2 days,
// where the tiers begin; 3, cam-plain's retention; 4, where the single
// images' tiers change; 5, the panos' retention), and 2 hours at each end
// (kept whole at 1 day; at 6, thinned to one per 2 hours, and past every
// retention). Each window holds intervals of every tier on each side of
// its age, so every rule and its edges are met with a sixth of the images
// of the 5 days (the images between the windows only met the same rules
// again, and made each purge and each crash point six times the work).
var thinWindows = []struct{ from, to int }{{24, 26}, {46, 50}, {70, 74}, {94, 98}, {118, 122}, {142, 144}}

// inThinWindow reports whether an image captured at is in a window of
// thinWindows, seen from now.
func inThinWindow(now, at time.Time) bool {
	age := now.Sub(at)
	return slices.ContainsFunc(thinWindows, func(w struct{ from, to int }) bool {
		return age >= time.Duration(w.from)*time.Hour && age < time.Duration(w.to)*time.Hour
	})
}

func thinOptions() (Options, time.Time) {
	start := time.Now()
	now := start.UTC().Truncate(24 * time.Hour).Add(-12*time.Hour + 7*time.Minute)
	o := quickOptions()
	o.Now = func() time.Time { return now.Add(time.Since(start)) }
	return o, now
}

// SeedThinning creates the fixture's images of kind for cameras; a pano
// is clear-day at 20 minutes past each hour. It writes them with
// BatchCreate, as seedKinds does.
func (f *Fixture) SeedThinning(t *testing.T, now time.Time, kind images.Kind, cameras ...string) {
	t.Helper()
	r := f.Seeders(t)[kind-1]
	var imgs []images.Image
	for _, c := range cameras {
		for at := now.Add(-policy.Days(6)).Truncate(thinEvery); at.Before(now.Add(-policy.Days(1))); at = at.Add(thinEvery) {
			if inThinWindow(now, at) {
				imgs = append(imgs, images.Image{CameraID: c, CapturedAt: at, IsClearDay: kind == images.Pano && at.Minute() == 20, BlobURI: thinBlob(kind, c, at)})
			}
		}
	}
	batchSeed(t, r, imgs)
	f.LastCreate = f.Now()
	f.Settle()
}

// thinBlob is the blob URI the fixture gives an image.
func thinBlob(kind images.Kind, camera string, at time.Time) string {
	return fmt.Sprintf("https://blobs.example/%s/%s/%d.jpg", kind, camera, at.Unix())
}

// wantThinned is the model of a kind's rule, from its definition: an image
// older than days goes; an image in an interval of a tier that lies wholly
// inside the tier's ages is kept only if it is its interval's keeper (the
// earliest, or the earliest that prefer picks when one does).
func wantThinned(now time.Time, days int, tiers []policy.Tier, captured []time.Time, prefer func(time.Time) bool) []time.Time {
	var out []time.Time
	keeper := map[string]time.Time{}
	tierOf := func(c time.Time) (string, bool) {
		for i, t := range tiers {
			until := t.UntilDays
			if until == 0 {
				until = days
			}
			start := c.Truncate(t.KeepOnePer)
			if start.Add(t.KeepOnePer).After(now.Add(-policy.Days(t.AfterDays))) {
				continue
			}
			if until > 0 && start.Before(now.Add(-policy.Days(until))) {
				continue
			}
			return fmt.Sprint(i, start), true
		}
		return "", false
	}
	sorted := slices.Clone(captured)
	slices.SortFunc(sorted, time.Time.Compare)
	for _, c := range sorted {
		if k, ok := tierOf(c); ok {
			if cur, seen := keeper[k]; !seen || (prefer != nil && prefer(c) && !prefer(cur)) {
				keeper[k] = c
			}
		}
	}
	for _, c := range sorted {
		if days > 0 && c.Before(now.Add(-policy.Days(days)).Truncate(time.Minute)) {
			continue
		}
		if k, ok := tierOf(c); ok && !keeper[k].Equal(c) {
			continue
		}
		out = append(out, c)
	}
	return out
}

// CapturedOf lists each camera's primary rows' capture times, oldest first,
// and checks that the index holds exactly one row for each.
func (f *Fixture) CapturedOf(t *testing.T, kind images.Kind) map[string][]time.Time {
	t.Helper()
	primary, _ := f.Repo(kind).Tables()
	out := map[string][]time.Time{}
	keys := map[string][]string{}
	for _, e := range rows(t, primary) {
		out[e.PartitionKey] = append(out[e.PartitionKey], captured(t, e))
		keys[e.PartitionKey] = append(keys[e.PartitionKey], e.RowKey)
	}
	indexed := f.IndexedRowKeys(t, kind)
	for c := range out {
		slices.SortFunc(out[c], time.Time.Compare)
		slices.Sort(keys[c])
		slices.Sort(indexed[c])
		if !slices.Equal(keys[c], indexed[c]) {
			t.Errorf("%s %s: %d primary rows, %d index rows: want one index row each", kind, c, len(keys[c]), len(indexed[c]))
		}
	}
	for c := range indexed {
		if _, ok := out[c]; !ok {
			t.Errorf("%s %s: %d index rows without primary rows", kind, c, len(indexed[c]))
		}
	}
	return out
}

// testThinningKeepsOnePerInterval: a purge with policies thins each
// camera's images as its tiers say, with age retention in the same job; the
// counts are exact, a dry run counts the same beforehand, a hold spares its
// camera, and a second pass deletes nothing.
func testThinningKeepsOnePerInterval(t *testing.T, ts *suite) {
	t.Parallel() // independent: stores and engines of its own
	ts.each(t, func(t *testing.T, open func(*testing.T, Options) *Fixture) {
		testThinning(t, open, 0)
	})
	if ts.h.mode() == pebbleMode {
		t.Run("a section per camera", func(t *testing.T) { testThinning(t, ts.open, 1) })
	}
}

// thinScenario is the fixture's policies, hold and images, and what the
// model says a purge with policies leaves of them.
type thinScenario struct {
	now    time.Time
	before map[images.Kind]map[string][]time.Time
	rules  map[images.Kind]map[string]thinRule
	want   map[images.Kind]retention.Counts
}

type thinRule struct {
	days   int
	tiers  []policy.Tier
	prefer func(time.Time) bool
}

var thinKinds = []images.Kind{images.Single, images.Pano}

// setUpThinning gives f the default policy (single images thinned in two
// tiers and kept for ever, panos kept 5 days and thinned to their first
// clear-day image per hour after 2), a camera on age retention alone, a
// held camera, and their images.
func setUpThinning(t *testing.T, f *Fixture, now time.Time) *thinScenario {
	t.Helper()
	singleTiers := []policy.Tier{{AfterDays: 2, KeepOnePer: 30 * time.Minute, UntilDays: 4}, {AfterDays: 4, KeepOnePer: 2 * time.Hour}}
	panoTiers := []policy.Tier{{AfterDays: 2, KeepOnePer: time.Hour}}
	p := f.Engine.Policies()
	for _, pol := range []policy.Policy{
		{Scope: policy.ScopeDefault, Days: map[images.Kind]int{images.Pano: 5},
			Tiers: map[images.Kind][]policy.Tier{images.Single: singleTiers, images.Pano: panoTiers}},
		{Scope: policy.ScopeCamera, Target: "cam-plain", Days: map[images.Kind]int{images.Single: 3}},
	} {
		if _, err := p.CreatePolicy(t.Context(), pol); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.CreateHold(t.Context(), policy.Hold{CameraID: "held-1", Reason: "case 7"}); err != nil {
		t.Fatal(err)
	}
	f.SeedThinning(t, now, images.Single, "cam-a", "cam-b", "cam-plain", "held-1")
	f.SeedThinning(t, now, images.Pano, "cam-a", "held-1")
	sc := &thinScenario{now: now, before: map[images.Kind]map[string][]time.Time{
		images.Single: f.CapturedOf(t, images.Single), images.Pano: f.CapturedOf(t, images.Pano)}}
	clearDay := func(c time.Time) bool { return c.Minute() == 20 }
	sc.rules = map[images.Kind]map[string]thinRule{
		images.Single: {"cam-a": {0, singleTiers, nil}, "cam-b": {0, singleTiers, nil}, "cam-plain": {3, nil, nil}},
		images.Pano:   {"cam-a": {5, panoTiers, clearDay}},
	}
	// The counts the model gives: every image gone, and of them those the
	// tiers take beyond what age alone would.
	sc.want = map[images.Kind]retention.Counts{}
	for kind, cams := range sc.rules {
		c := sc.want[kind]
		for cam, r := range cams {
			all := sc.before[kind][cam]
			gone := int64(len(all) - len(wantThinned(now, r.days, r.tiers, all, r.prefer)))
			c.MetadataRows += gone
			c.IndexRows += gone
			c.ThinnedRows += int64(len(wantThinned(now, r.days, nil, all, nil)) - len(wantThinned(now, r.days, r.tiers, all, r.prefer)))
			c.DevicesTotal++
			c.DevicesDone++
		}
		// held-1, which the tiers would thin, is counted held.
		c.DevicesTotal++
		c.DevicesHeld++
		sc.want[kind] = c
	}
	if sc.want[images.Single].ThinnedRows < 40 || sc.want[images.Pano].MetadataRows <= sc.want[images.Pano].ThinnedRows {
		t.Fatalf("the fixture thins too little to test: %+v", sc.want)
	}
	return sc
}

// deleted is how many images the model says a purge with policies deletes.
func (sc *thinScenario) deleted() int64 {
	return sc.want[images.Single].MetadataRows + sc.want[images.Pano].MetadataRows
}

// checkCounts checks a job's counts against the model's. lowerBoundOK
// allows the queue design's flag, which a crash or a redelivery raises (a
// task slower than its visibility timeout on a loaded machine): its counts
// stay exact, the flag says they might not be (Counts.MetadataRowsLowerBound).
// The embedded purge's counts are exact by construction, flag and all.
func (sc *thinScenario) checkCounts(t *testing.T, j *retention.Job, lowerBoundOK bool) {
	t.Helper()
	if j.State != retention.Succeeded {
		t.Fatalf("job %s: %s (%s)", j.ID, j.State, j.Error)
	}
	for _, kind := range thinKinds {
		got := countsOf(j, kind)
		if lowerBoundOK {
			got.MetadataRowsLowerBound = false
		}
		if got != sc.want[kind] {
			t.Errorf("dry run %v, %s: counts %+v, want %+v", j.DryRun, kind, got, sc.want[kind])
		}
	}
}

// checkKept checks that every camera keeps exactly what the model says,
// each image with its index row, and the held camera everything.
func (sc *thinScenario) checkKept(t *testing.T, f *Fixture) {
	t.Helper()
	for kind, cams := range sc.rules {
		after := f.CapturedOf(t, kind)
		for cam, r := range cams {
			if w := wantThinned(sc.now, r.days, r.tiers, sc.before[kind][cam], r.prefer); !slices.EqualFunc(after[cam], w, time.Time.Equal) {
				t.Errorf("%s %s: kept %d images, want %d: %v", kind, cam, len(after[cam]), len(w), diffTimes(after[cam], w))
			}
		}
		if !slices.EqualFunc(after["held-1"], sc.before[kind]["held-1"], time.Time.Equal) {
			t.Errorf("%s held-1: %d images after the purge, %d Before: a hold spares everything", kind, len(after["held-1"]), len(sc.before[kind]["held-1"]))
		}
	}
}

func testThinning(t *testing.T, open func(*testing.T, Options) *Fixture, sectionCameras int) {
	o, now := thinOptions()
	o.SectionCameras = sectionCameras
	f := open(t, o)
	f.Run(t)
	sc := setUpThinning(t, f, now)
	dry := f.Purge(t, retention.StartRequest{Kinds: thinKinds, UsePolicies: true, DryRun: true})
	sc.checkCounts(t, dry, false)
	sc.checkCounts(t, f.Purge(t, retention.StartRequest{Kinds: thinKinds, UsePolicies: true}), f.QueueDesign())
	sc.checkKept(t, f)
	again := f.Purge(t, retention.StartRequest{Kinds: thinKinds, UsePolicies: true})
	if got := again.Totals(); got.MetadataRows != 0 || got.IndexRows != 0 {
		t.Errorf("a second pass deleted %+v: want nothing", got)
	}
}

// testCrashAtAnyWriteWhileThinningResumesExactly: a purge with policies
// that thins, whose store dies after any of its writes, resumes after a
// restart and ends with the model's exact counts and kept images: a
// section's thinning, index rows and counts commit together or not at all.
func testCrashAtAnyWriteWhileThinningResumesExactly(t *testing.T, ts *suite) {
	t.Parallel() // independent: stores and engines of its own
	for _, v := range []struct {
		name   string
		queue  bool
		outbox bool
		step   int
	}{
		{"pebble", false, false, 1},
		{"pebble, with the outbox", false, true, 1},
		// The queue design makes about 180 writes here, most of them alike:
		// a thinned row's index batch (one per minute partition). Every
		// eighth still crashes at each kind of write, at many places.
		{"pebble-queue", true, false, 8},
		// With the outbox, a delete batch writes its outbox rows pending
		// before it and ready after it, and the job's end reconciles and
		// seals. Those writes and the primary deletes are what the outbox's
		// promise rests on, so they alone are counted: a crash at each of
		// them (the other writes were crashed at above).
		{"pebble-queue, with the outbox", true, true, 1},
	} {
		if v.queue != ts.h.Queue {
			continue
		}
		t.Run(v.name, func(t *testing.T) {
			base, sc := seedThinCrash(t, ts, v.outbox)
			var wrap func(*HookedBackend) store.Backend
			if v.queue && v.outbox {
				wrap = base.OutboxWritesOnly
			}
			// A point in a bubble reopens the seeded store there, on
			// clocks going on from the seed's end.
			seeded := base.instant()
			crashAtEveryNthWrite(t, ts, v.step, func(t *testing.T, _ func(*testing.T, Options) *Fixture, n int) bool {
				crashed := base.FS.CrashClone(vfs.CrashCloneCfg{})
				if ts.crashesInBubbles() {
					return crashWhileThinning(t, base.reopenInBubble(t, crashed, seeded), sc, n, v.outbox, wrap)
				}
				return crashWhileThinning(t, base.Reopen(t, crashed), sc, n, v.outbox, wrap)
			})
		})
	}
}

// OutboxWritesOnly makes a crashing store count only the writes of the
// outbox and the deletes (and the end's fences) of primary rows: it dies
// after the n-th of those, and every write after fails.
func (f *Fixture) OutboxWritesOnly(h *HookedBackend) store.Backend {
	counted := map[string]bool{}
	for _, r := range f.Repos {
		primary, _ := r.Tables()
		counted[primary.Name()+" batch-delete"] = true
		counted[primary.Name()+" update"] = true // the end's fence of a kept row
	}
	before, dead := h.Before, h.After
	h.Before = func(table, op string, keys []store.Key) error {
		if strings.EqualFold(table, retention.DefaultOutboxTable) || counted[table+" "+op] {
			return before(table, op, keys)
		}
		return dead()
	}
	return h
}

// seedThinCrash seeds the thinning scenario once, on a store whose engine
// never runs: each crash point opens a clone of it, as a restart would,
// rather than seeding a store of its own (most of a point's time under
// -race).
func seedThinCrash(t *testing.T, ts *suite, outbox bool) (*Fixture, *thinScenario) {
	t.Helper()
	o, now := thinOptions()
	o.Outbox = outbox
	o.SectionCameras = 1 // a section per camera: more writes to crash at
	f := ts.open(t, o)
	return f, setUpThinning(t, f, now)
}

// crashWhileThinning runs a purge with policies that thins on f, a clone
// of the seeded store, which dies after n writes, and checks the resumed
// job; with the outbox, that it names each deleted image once.
func crashWhileThinning(t *testing.T, f *Fixture, sc *thinScenario, n int, outbox bool, wrap func(*HookedBackend) store.Backend) bool {
	{
		c := f.StartCrashing(t, n, wrap, retention.StartRequest{Kinds: thinKinds, UsePolicies: true})
		restarted, dead, jobs := c.restarted, c.dead, c.jobs
		if len(jobs) == 0 || (c.startErr != nil && jobs[0].Unconfirmed) {
			if !dead {
				t.Fatalf("no job or no start (%v), and no crash", c.startErr)
			}
			// The job never runs: nothing is deleted.
			for _, kind := range thinKinds {
				after := restarted.CapturedOf(t, kind)
				for cam, had := range sc.before[kind] {
					if !slices.EqualFunc(after[cam], had, time.Time.Equal) {
						t.Errorf("%s %s: %d images after a purge that never started, %d before", kind, cam, len(after[cam]), len(had))
					}
				}
			}
			return dead
		}
		if dead {
			restarted.Run(t)
		}
		sc.checkCounts(t, restarted.Await(t, jobs[0].ID), f.QueueDesign())
		sc.checkKept(t, restarted)
		if outbox {
			sc.checkOutbox(t, restarted)
		}
		return dead
	}
}

// checkOutbox checks that the outbox names every image the purge deleted
// exactly once, with its blob URI, and no other.
func (sc *thinScenario) checkOutbox(t *testing.T, f *Fixture) {
	t.Helper()
	named := map[string]int{}
	var seq uint64
	for _, d := range deletedAfter(t, f, "") {
		if !f.QueueDesign() && d.Seq != seq+1 {
			t.Fatalf("outbox position %d after %d: want them in sequence", d.Seq, seq)
		}
		seq = d.Seq
		if d.BlobURI != thinBlob(d.Kind, d.CameraID, d.CapturedAt) || d.JobID == "" || d.DeletedAt.IsZero() {
			t.Errorf("outbox row %+v: want its image's blob URI, its job and when", d)
		}
		named[thinBlob(d.Kind, d.CameraID, d.CapturedAt)]++
	}
	deleted := 0
	for _, kind := range thinKinds {
		after := f.CapturedOf(t, kind)
		for cam, had := range sc.before[kind] {
			for _, at := range had {
				kept := slices.ContainsFunc(after[cam], at.Equal)
				switch n := named[thinBlob(kind, cam, at)]; {
				case kept && n > 0:
					t.Errorf("%s %s %s: kept, yet named %d times in the outbox", kind, cam, at, n)
				case !kept && n != 1:
					t.Errorf("%s %s %s: deleted, named %d times in the outbox: want once", kind, cam, at, n)
				case !kept:
					deleted++
				}
			}
		}
	}
	if deleted == 0 || len(named) != deleted {
		t.Errorf("the outbox names %d images, %d were deleted", len(named), deleted)
	}
}

// testThinningTakesALateImage: an image created late in an interval
// already thinned goes at the next pass, counted, and the keeper stays.
func testThinningTakesALateImage(t *testing.T, ts *suite) {
	t.Parallel() // independent: stores and engines of its own
	ts.each(t, thinningTakesALateImage)
}

func thinningTakesALateImage(t *testing.T, open func(*testing.T, Options) *Fixture) {
	o, now := thinOptions()
	f := open(t, o)
	f.Run(t)
	tiers := []policy.Tier{{AfterDays: 2, KeepOnePer: time.Hour}}
	if _, err := f.Engine.Policies().CreatePolicy(t.Context(), policy.Policy{Scope: policy.ScopeDefault,
		Tiers: map[images.Kind][]policy.Tier{images.Single: tiers}}); err != nil {
		t.Fatal(err)
	}
	f.SeedThinning(t, now, images.Single, "cam-a")
	first := f.Purge(t, retention.StartRequest{Kinds: []images.Kind{images.Single}, UsePolicies: true})
	if first.Totals().ThinnedRows == 0 {
		t.Fatalf("the first pass thinned nothing: %+v", first.Totals())
	}
	thinned := f.CapturedOf(t, images.Single)["cam-a"]
	hour := now.Add(-policy.Days(3)).Truncate(time.Hour)
	if !slices.ContainsFunc(thinned, hour.Equal) {
		t.Fatalf("the hour %s kept no image at its start: %v", hour, thinned)
	}
	if _, err := f.Seeders(t)[0].Create(t.Context(), images.Image{CameraID: "cam-a", CapturedAt: hour.Add(5 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	f.LastCreate = f.Now()
	f.Settle()
	j := f.Purge(t, retention.StartRequest{Kinds: []images.Kind{images.Single}, UsePolicies: true})
	if got := j.Totals(); got.MetadataRows != 1 || got.ThinnedRows != 1 || got.IndexRows != 1 {
		t.Errorf("the pass after a late image deleted %+v: want that one image", got)
	}
	if after := f.CapturedOf(t, images.Single)["cam-a"]; !slices.EqualFunc(after, thinned, time.Time.Equal) {
		t.Errorf("kept %s; want what the first pass kept", diffTimes(after, thinned))
	}
}

func countsOf(j *retention.Job, kind images.Kind) retention.Counts {
	for _, k := range j.Kinds {
		if k.Kind == kind {
			return k.Counts
		}
	}
	return retention.Counts{}
}

// diffTimes says what got has that want has not, and the reverse, briefly.
func diffTimes(got, want []time.Time) string {
	var extra, missing []time.Time
	for _, g := range got {
		if !slices.ContainsFunc(want, g.Equal) {
			extra = append(extra, g)
		}
	}
	for _, w := range want {
		if !slices.ContainsFunc(got, w.Equal) {
			missing = append(missing, w)
		}
	}
	return fmt.Sprintf("extra %v, missing %v", extra[:min(len(extra), 4)], missing[:min(len(missing), 4)])
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
