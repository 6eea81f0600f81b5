package retentiontest

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/retention"
)

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
