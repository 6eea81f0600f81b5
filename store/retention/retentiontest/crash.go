package retentiontest

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention"
)

// testCrashAtAnyWriteResumesExactly proves invariant 3: the store is killed
// after each possible number of writes of a purge; the restarted engine
// finishes the same job, with exact counts, and no row younger than the
// cutoff is lost.
//
// A purge's writes vary a little from run to run (lease renewals, polls), so
// the number of crash points is not learnt from one clean run: the test
// crashes after 0, 1, 2, ... writes until a purge runs to its end, engine
// stopped, without reaching the crash point; every point before it crashed.
func testCrashAtAnyWriteResumesExactly(t *testing.T, ts *suite) {
	t.Parallel() // independent: stores and engines of its own
	ts.each(t, func(t *testing.T, newFixture func(*testing.T, Options) *Fixture) {
		crashAtEveryWrite(t, ts, crashAndResume)
	})
}

// crashAtEveryWrite runs crashAndResume after 0, 1, 2, ... writes (every
// 7th in -short) until a purge ends without reaching the crash point. It
// runs crashBatch points at a time, each on a store of its own; the queue
// design's on Pebble each in a synctest bubble of its own (see
// crashesInBubbles).
func crashAtEveryWrite(t *testing.T, ts *suite, crashAndResume func(*testing.T, func(*testing.T, Options) *Fixture, int) bool) {
	t.Helper()
	crashAtEveryNthWrite(t, ts, 1, crashAndResume)
}

// crashAtEveryNthWrite is crashAtEveryWrite crashing after 0, n, 2n, ...
// writes (7n in -short).
func crashAtEveryNthWrite(t *testing.T, ts *suite, step int, crashAndResume func(*testing.T, func(*testing.T, Options) *Fixture, int) bool) {
	t.Helper()
	if testing.Short() {
		step *= 7
	}
	crashes, filtered := 0, false
	type point struct{ ran, crashed, ok bool }
points:
	for n := 0; ; n += step * crashBatch {
		if n > 10_000 {
			t.Fatalf("a purge still crashed after %d writes: its writes never end", n)
		}
		var points [crashBatch]point
		var wg sync.WaitGroup
		for i := range points {
			at := n + i*step
			wg.Go(func() {
				p := &points[i]
				p.ok = t.Run(fmt.Sprintf("after %d writes", at), func(t *testing.T) {
					p.ran = true
					if !ts.crashesInBubbles() {
						p.crashed = crashAndResume(t, ts.open, at)
						return
					}
					synctest.Test(t, func(t *testing.T) { p.crashed = crashAndResume(t, ts.openInBubble, at) })
				})
			})
		}
		wg.Wait()
		for i, p := range points {
			if !p.ran { // -run left this point out
				if filtered = true; n+i*step >= 1000 {
					return
				}
				continue
			}
			if !p.ok || !p.crashed {
				break points
			}
			crashes++
		}
	}
	if filtered || t.Failed() {
		return
	}
	// The embedded purge writes a handful of batches (the job's start, its
	// lease, its sections, its end); the queue design many more.
	if crashes < 6 {
		t.Fatalf("a purge crashed at only %d points: it made too few writes to test", crashes)
	}
	t.Logf("crashed at %d points, %d writes apart", crashes, step)
}

// crashBatch is how many crash points crashAtEveryWrite runs at once, each
// on a store of its own: a point spends most of its time waiting on
// Azurite (rows settling on its clock, messages hidden), and the waits of a
// batch overlap. Twelve at once on Azurite made points outlast their
// two-minute patience on a loaded 2-core machine.
const crashBatch = 4

// crashAndResume runs a purge whose store dies after n writes, restarts it
// when it died, and checks the job ends with exact counts. It reports
// whether the store died: false means the purge made fewer than n+1 writes.
func crashAndResume(t *testing.T, newFixture func(*testing.T, Options) *Fixture, n int) bool {
	return crashAndResumeOn(t, newFixture, n, func(b *HookedBackend) store.Backend { return b })
}

// testCrashAtAnyWriteOfTheQueueDesignResumesExactly is the test above with
// the Azure backend's engine on the embedded store: its workers delete a
// batch's primary rows, then their index rows, and a crash between leaves
// no primary row without its index row (checked at every crash point).
func testCrashAtAnyWriteOfTheQueueDesignResumesExactly(t *testing.T, ts *suite) {
	crashAtEveryWrite(t, ts, crashAndResume)
}

// requireIndexed fails the test if a primary row of kind has no index row
// in either key form: such a row would never expire.
func requireIndexed(t *testing.T, f *Fixture, kind images.Kind) {
	t.Helper()
	r := f.Repo(kind)
	primary, index := r.Tables()
	indexRows := map[store.Key]bool{}
	for _, e := range rows(t, index) {
		indexRows[key(e)] = true
	}
	for _, e := range rows(t, primary) {
		if !slices.ContainsFunc(r.IndexKeys(e.PartitionKey, e.RowKey), func(k store.Key) bool { return indexRows[k] }) {
			t.Errorf("%s primary row %s/%s has no index row after the crash", kind, e.PartitionKey, e.RowKey)
		}
	}
}

// testCrashAtAnyWriteOfAnEmbeddedPurgeResumesExactly is the test above on
// the embedded store with its transactions and purges, as the daemon runs
// it: a crash before or after any write, its exclusive batches included,
// resumes with exact counts and no row without its partner.
func testCrashAtAnyWriteOfAnEmbeddedPurgeResumesExactly(t *testing.T, ts *suite) {
	crashAtEveryWrite(t, ts, func(t *testing.T, newFixture func(*testing.T, Options) *Fixture, n int) bool {
		return crashAndResumeOn(t, newFixture, n, func(b *HookedBackend) store.Backend { return transactingBackend{b} })
	})
}

// crashedStart is a purge started on a store that dies after some writes.
type crashedStart struct {
	// restarted is the store as a restart finds it, its engine not running
	// yet; the fixture itself when the store never died.
	restarted *Fixture
	dead      bool
	jobs      []*retention.Job
	// startErr is Start's: it fails if the crash comes first, and its job
	// may exist all the same, to run only if its confirmation landed.
	startErr error
}

// StartCrashing starts req on f's engine over its store wrapped to die
// after n writes (wrap nil: as it is), waits for the crash or the job's
// end, stops the engine and reopens the store if it died.
func (f *Fixture) StartCrashing(t *testing.T, n int, wrap func(*HookedBackend) store.Backend, req retention.StartRequest) crashedStart {
	t.Helper()
	crash := &crashAfter{n: n, fs: f.FS, took: f.writeTime}
	var backend store.Backend = &HookedBackend{Backend: f.Base, Before: crash.Before, After: crash.After}
	if wrap != nil {
		backend = wrap(backend.(*HookedBackend))
	}
	f.OpenEngine(t, backend)
	f.Run(t)
	j, startErr := f.Engine.Start(t.Context(), req)
	if startErr == nil {
		waitCrashed(t, f, crash, j.ID)
	}
	// Once stopped, the engine writes no more: the crash happened or never will.
	f.Stop()
	crash.mu.Lock()
	c := crashedStart{restarted: f, dead: crash.dead, startErr: startErr}
	crashed := crash.crashed
	crash.mu.Unlock()
	if c.dead {
		c.restarted = f.Reopen(t, crashed)
	}
	var err error
	if c.jobs, _, err = c.restarted.Engine.List(t.Context(), 10, nil); err != nil {
		t.Fatal(err)
	}
	return c
}

func crashAndResumeOn(t *testing.T, newFixture func(*testing.T, Options) *Fixture, n int, wrap func(*HookedBackend) store.Backend) bool {
	kinds := []images.Kind{images.Single, images.Pano}
	f := newFixture(t, quickOptions())
	f.SeedKinds(t, 3, kinds) // the kinds purged: each crash point seeds anew
	c := f.StartCrashing(t, n, wrap, retention.StartRequest{Kinds: kinds, Cutoff: cutoff})
	restarted, dead, jobs, startErr := c.restarted, c.dead, c.jobs, c.startErr
	if dead {
		for _, kind := range kinds {
			requireIndexed(t, restarted, kind)
		}
	}
	if len(jobs) == 0 {
		if !dead {
			t.Fatal("no job, and no crash")
		}
		return dead // crashed before the job was recorded: nothing was deleted
	}
	if len(jobs) != 1 {
		t.Fatalf("%d jobs after restart", len(jobs))
	}
	// A Start that failed may still have confirmed its job: the crash can
	// come between the confirmation landing and its reply, as a client sees
	// a process dying after its commit. Such a job runs as any other.
	if startErr != nil && jobs[0].Unconfirmed {
		// One step of the restarted engine runs every job it may run.
		if _, err := restarted.Engine.RunOnce(t.Context()); err != nil {
			t.Fatal(err)
		}
		if j, err := restarted.Engine.Get(t.Context(), jobs[0].ID); err != nil || j.State != retention.Pending || !j.Unconfirmed {
			t.Fatalf("the job of a Start that crashed: %+v, %v; want it pending, never run", j, err)
		}
		for _, kind := range kinds {
			if got := restarted.Census(t, kind, base.Add(2*time.Minute)); got.PrimaryOld != 3*expiredPerCamera || got.IndexOld != 3*expiredPerCamera {
				t.Errorf("%s after a Start that crashed: %+v, want nothing deleted", kind, got)
			}
		}
		return dead
	}
	if dead {
		restarted.Run(t)
	}
	j := restarted.Await(t, jobs[0].ID)
	if j.State != retention.Succeeded {
		t.Fatalf("resumed job: %s (%s)", j.State, j.Error)
	}
	want := expiredCounts(2)
	want.DevicesTotal, want.DevicesDone = 2*3, 2*3
	want.MetadataRows, want.IndexRows = 2*3*expiredPerCamera, 2*3*expiredPerCamera
	wantCountsAfterFaults(t, "resumed job", j.Totals(), want)
	for _, kind := range kinds {
		if got := restarted.Census(t, kind, j.Boundary()); got != (Census{PrimaryNew: 3 * keptPerCamera, IndexNew: 3 * keptPerCamera}) {
			t.Errorf("%s after resume: %+v", kind, got)
		}
	}
	return dead
}

// waitCrashed waits until the simulated crash happened or the job ended.
func waitCrashed(t *testing.T, f *Fixture, crash *crashAfter, id string) {
	t.Helper()
	deadline := time.After(patience)
	for {
		crash.mu.Lock()
		dead := crash.dead
		crash.mu.Unlock()
		if dead {
			return
		}
		if j, err := f.Engine.Get(t.Context(), id); err == nil && j.State.Terminal() {
			return
		}
		select {
		case <-f.Engine.Changed():
		case <-time.After(max(5*time.Millisecond, f.Opts.PollInterval)):
		case <-deadline:
			t.Fatalf("no crash and no end after %v", patience)
		}
	}
}

// crashesInBubbles reports whether the crash points run in synctest
// bubbles: those of the queue design on Pebble. Its visibility timeouts,
// leases and polls then pass in virtual time, costing no wall-clock time
// and not racing the machine's load, and its writes take bubbleWriteTime,
// so that as many writes are crashed at as on the wall clock (86, 92 and
// 26 points where the wall clock gave 89, 103 and 33). The embedded
// driver's purges renew their lease only on the wall clock, where a
// loaded machine makes them slow: in a bubble its loops lost those points
// (14 where the wall clock gave 21), so they stay on the wall clock.
func (ts *suite) crashesInBubbles() bool { return ts.h.Backend == Pebble && ts.h.Queue }
