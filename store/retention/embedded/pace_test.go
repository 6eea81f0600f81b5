package embedded_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/pebble"
	"github.com/metadatad/metadatad/store/retention"
	"github.com/metadatad/metadatad/store/retention/embedded"
	"github.com/metadatad/metadatad/store/retention/policy"
)

// The pacing tests run in synctest bubbles: a section costs virtual time
// (costlyPurger), so the purge's share of the time and its sections' sizes
// are exact, and cost no wall-clock time.

// costlyPurger is the embedded store whose sections take cost(camera) of
// virtual time for each camera day they delete rows of, and fixed more
// for the section, as if the work were that slow, and records each
// committed section.
type costlyPurger struct {
	*pebble.DB
	cost  func(camera string) time.Duration
	fixed time.Duration // a section's, at its job record
	// commit, if set, is the time a section's commit takes after its
	// stage, given how many sections committed before it.
	commit func(before int) time.Duration
	// committed, if set, is called after each committed section with
	// how many so far.
	committed func(n int)

	mu       sync.Mutex
	sections []spent

	// surveys and lists count the reads of every camera before the
	// sections: whole tallies (Tallies), and their keys (TalliedPartitions).
	surveys, lists atomic.Int32
}

func (c *costlyPurger) Tallies(ctx context.Context, table string, partitions store.Range, through time.Time, visit func(*store.DayTally) error) error {
	c.surveys.Add(1)
	return c.DB.Tallies(ctx, table, partitions, through, visit)
}

func (c *costlyPurger) TalliedPartitions(ctx context.Context, table string, through time.Time, visit func(string, int) error) error {
	c.lists.Add(1)
	return c.DB.TalliedPartitions(ctx, table, through, visit)
}

// spent is one committed section: its cameras' days, its time, and the
// tallies it asked for: the ranges of cameras and the cameras named.
type spent struct {
	days  int
	took  time.Duration
	spans []store.Range
	named []string
}

func (c *costlyPurger) Exclusive(ctx context.Context, through time.Time, stage func(context.Context, store.PurgeBatch) error) error {
	b := &countingBatch{cost: c.cost, fixed: c.fixed}
	began := time.Now()
	err := c.DB.Exclusive(ctx, through, func(ctx context.Context, pb store.PurgeBatch) error {
		b.PurgeBatch = pb
		return stage(ctx, b)
	})
	if err == nil && c.commit != nil {
		c.mu.Lock()
		before := len(c.sections)
		c.mu.Unlock()
		time.Sleep(c.commit(before))
	}
	if err == nil && len(b.cameras) > 0 {
		c.mu.Lock()
		c.sections = append(c.sections, spent{days: len(b.cameras), took: time.Since(began), spans: b.spans, named: b.named})
		n := len(c.sections)
		c.mu.Unlock()
		if c.committed != nil {
			c.committed(n)
		}
	}
	return err
}

func (c *costlyPurger) spent() []spent {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]spent(nil), c.sections...)
}

// countingBatch records the camera of each day whose rows a section
// deletes, which costs it cost(camera), and takes fixed at its first Put
// (a section's job record, written after its cameras).
type countingBatch struct {
	store.PurgeBatch
	cost    func(camera string) time.Duration
	fixed   time.Duration
	put     bool
	cameras []string
	spans   []store.Range
	named   []string
}

func (b *countingBatch) Tallies(ctx context.Context, table string, partitions store.Range, through time.Time, visit func(*store.DayTally) error) error {
	b.spans = append(b.spans, partitions)
	return b.PurgeBatch.Tallies(ctx, table, partitions, through, visit)
}

func (b *countingBatch) TalliesOf(ctx context.Context, table string, partitions []string, through time.Time, visit func(*store.DayTally) error) error {
	b.named = append(b.named, partitions...)
	return b.PurgeBatch.TalliesOf(ctx, table, partitions, through, visit)
}

func (b *countingBatch) Put(table string, e store.Entity) (store.Entity, error) {
	if !b.put {
		b.put = true
		time.Sleep(b.fixed)
	}
	return b.PurgeBatch.Put(table, e)
}

func (b *countingBatch) DeleteRowsBefore(table, partition string, boundary time.Time, tallies []store.DayTally) (int64, error) {
	n, err := b.PurgeBatch.DeleteRowsBefore(table, partition, boundary, tallies)
	if n > 0 {
		b.cameras = append(b.cameras, partition)
		time.Sleep(b.cost(partition))
	}
	return n, err
}

// pacedFixture is an embedded store in a bubble with cameras of expired
// single images, and an engine over it whose Live is live.
type pacedFixture struct {
	purger *costlyPurger
	engine *retention.Engine
	repo   *images.Repository
	cutoff time.Time
	stop   func()
}

const (
	pacedCameras = 120
	pacedImages  = 5 // per camera, all on one day a month ago
)

func newPacedFixture(t *testing.T, opts embedded.Options, live *atomic.Bool, cost func(string) time.Duration) *pacedFixture {
	t.Helper()
	f := openPacedFixture(t, pacedStore{opts: opts, live: live, cost: cost, fs: vfs.NewMem()})
	seedPaced(t, f)
	f.run(t)
	return f
}

// pacedImagesOf are the cameras' images, all expired a month before now.
func pacedImagesOf(now time.Time) []images.Image {
	var imgs []images.Image
	for c := range pacedCameras {
		for i := range pacedImages {
			imgs = append(imgs, images.Image{CameraID: fmt.Sprintf("cam-%03d", c), CapturedAt: now.AddDate(0, -1, 0).Add(time.Duration(i) * time.Minute),
				BlobURI: fmt.Sprintf("https://images.example/%d/%d.jpg", c, i)})
		}
	}
	return imgs
}

// pacedStore is how a pacedFixture opens: its engine's pace and Live,
// its sections' cost, its filesystem, whether purges keep the outbox.
type pacedStore struct {
	opts   embedded.Options
	live   *atomic.Bool
	cost   func(string) time.Duration
	fixed  time.Duration
	commit func(before int) time.Duration // as costlyPurger.commit
	fs     *vfs.MemFS
	outbox bool
}

// openPacedFixture opens the store on s.fs as it is and the engine over
// it, not yet running.
func openPacedFixture(t *testing.T, s pacedStore) *pacedFixture {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	db, err := pebble.Open(pebble.Options{Dir: "db", FS: s.fs, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	p := &costlyPurger{DB: db, cost: s.cost, fixed: s.fixed, commit: s.commit}
	repo, err := images.Open(t.Context(), p, images.Options{Kind: images.Single})
	if err != nil {
		t.Fatal(err)
	}
	e, err := retention.Open(t.Context(), retention.Options{Backend: p, Repositories: []*images.Repository{repo}, Driver: s.opts.New,
		Logger: log, Live: s.live.Load, Outbox: s.outbox, ReplicaID: "embedded"})
	if err != nil {
		t.Fatal(err)
	}
	return &pacedFixture{purger: p, engine: e, repo: repo, cutoff: time.Now().UTC().AddDate(0, 0, -7)}
}

// run runs the engine until the test ends or stop.
func (f *pacedFixture) run(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := f.engine.Run(ctx); err != nil {
			t.Error(err)
		}
	}()
	var once sync.Once
	f.stop = func() {
		once.Do(func() {
			cancel()
			<-done
		})
	}
	t.Cleanup(f.stop)
}

// purge runs a purge of everything expired to its end, checking its counts.
func (f *pacedFixture) purge(t *testing.T) *retention.Job {
	t.Helper()
	j, err := f.engine.Start(t.Context(), retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: f.cutoff})
	if err != nil {
		t.Fatal(err)
	}
	return f.await(t, j)
}

// await waits for j's end and checks that it deleted every expired row,
// counted exactly.
func (f *pacedFixture) await(t *testing.T, j *retention.Job) *retention.Job {
	t.Helper()
	j = f.end(t, j)
	if c := j.Totals(); c.MetadataRows != pacedCameras*pacedImages || c.IndexRows != c.MetadataRows {
		t.Fatalf("purge counted %d primary and %d index rows, want %d of each", c.MetadataRows, c.IndexRows, pacedCameras*pacedImages)
	}
	return j
}

// end waits for j's successful end.
func (f *pacedFixture) end(t *testing.T, j *retention.Job) *retention.Job {
	t.Helper()
	var err error
	for !j.State.Terminal() {
		time.Sleep(10 * time.Millisecond)
		if j, err = f.engine.Get(t.Context(), j.ID); err != nil {
			t.Fatal(err)
		}
	}
	if j.State != retention.Succeeded {
		t.Fatalf("purge ended %s (%s)", j.State, j.Error)
	}
	// The job's end is committed with its last section, which the
	// costlyPurger records only once its commit returns: wait for that
	// (the test's poll and the section's last sleep can end at the same
	// virtual instant).
	synctest.Wait()
	return j
}

// daysOf is the camera days of each section.
func daysOf(sections []spent) []int {
	var days []int
	for _, s := range sections {
		days = append(days, s.days)
	}
	return days
}

// work is the sections' time in all.
func work(sections []spent) time.Duration {
	var d time.Duration
	for _, s := range sections {
		d += s.took
	}
	return d
}

// TestALivePurgeKeepsItsShare: while requests are served, the purge works
// in sections of about Options.SectionTime, sized from the time the
// sections before took (the first, a small probe); its first LiveBurst of
// work runs back to back, and after it the purge rests after each section
// so that its work is LiveShare of its time; on an idle store it runs
// unpaced, with nothing but its work in its time.
func TestALivePurgeKeepsItsShare(t *testing.T) {
	const perCamera = time.Millisecond
	for _, tc := range []struct {
		name    string
		serving bool
		burst   time.Duration // as Options.LiveBurst: -1, none
	}{
		{"serving", true, -1},
		{"serving after a burst", true, 40 * time.Millisecond},
		{"idle", false, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				opts := embedded.Options{SectionTime: 4 * time.Millisecond, LiveShare: 0.1, LiveBurst: tc.burst}
				var live atomic.Bool
				live.Store(tc.serving)
				f := newPacedFixture(t, opts, &live, func(string) time.Duration { return perCamera })
				j := f.purge(t)
				sections := f.purger.spent()
				took, worked := j.Ended.Sub(j.Started), work(sections)
				t.Logf("%d sections, %s of work in %s", len(sections), worked, took)
				if want := pacedCameras * perCamera; worked != want {
					t.Fatalf("sections worked %s, want %s (a camera's day each)", worked, want)
				}
				// The job's end is stamped in its last section's batch, as
				// that section's work begins.
				if !tc.serving {
					if len(sections) != 1 || took > worked {
						t.Errorf("an idle purge took %d sections and %s for %s of work, want one section and no rest", len(sections), took, worked)
					}
					return
				}
				// Every section after the probe holds the section time's
				// worth, as the probe measured it, but the first, which
				// holds what the probe left of the burst (and the probe
				// refilled, at the share), in whole cameras; the last one
				// the rest.
				for i, s := range sections[1 : len(sections)-1] {
					want := opts.SectionTime
					if probe := sections[0].took; i == 0 && tc.burst > 0 {
						want = (tc.burst - probe + time.Duration(float64(probe)*opts.LiveShare)).Truncate(perCamera)
					}
					if s.took != want {
						t.Errorf("section %d took %s, want %s", i+1, s.took, want)
					}
				}
				// The rests keep the work past the burst to its share:
				// each section's time over the share, to the last
				// section's start.
				last, burst := sections[len(sections)-1].took, max(0, tc.burst)
				want := time.Duration(float64(worked-last-burst) / opts.LiveShare)
				if took < want || took > want+20*time.Millisecond {
					t.Errorf("purge of %s of work took %s, want %s (a burst of %s, then a share of %.2f)", worked, took, want, burst, opts.LiveShare)
				}
			})
		})
	}
}

// TestAUniformLivePurgeListsItsCameras: a purge in sections (while
// requests are served) in which every camera has the job's boundary sizes
// its sections from the tallies' keys alone, and still deletes and counts
// every row; one that keeps some cameras (a legal hold) reads every
// camera's tallies first, for the rows it keeps.
func TestAUniformLivePurgeListsItsCameras(t *testing.T) {
	for _, tc := range []struct {
		name           string
		held           string
		surveys, lists int32
	}{
		{"uniform", "", 0, 1},
		{"a camera held", "cam-007", 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var live atomic.Bool
				live.Store(true)
				opts := embedded.Options{SectionTime: 4 * time.Millisecond, LiveShare: 0.5}
				f := newPacedFixture(t, opts, &live, func(string) time.Duration { return time.Millisecond })
				want := int64(pacedCameras * pacedImages)
				if tc.held != "" {
					if _, err := f.engine.Policies().CreateHold(t.Context(), policy.Hold{CameraID: tc.held}); err != nil {
						t.Fatal(err)
					}
					want -= pacedImages
				}
				j, err := f.engine.Start(t.Context(), retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: f.cutoff})
				if err != nil {
					t.Fatal(err)
				}
				j = f.end(t, j)
				if c := j.Totals(); c.MetadataRows != want || c.IndexRows != want {
					t.Errorf("purge counted %d primary and %d index rows, want %d of each", c.MetadataRows, c.IndexRows, want)
				}
				if n := len(f.purger.spent()); n < 3 {
					t.Errorf("%d sections, want several: the purge is sectioned while serving", n)
				}
				if s, l := f.purger.surveys.Load(), f.purger.lists.Load(); s != tc.surveys || l != tc.lists {
					t.Errorf("read the cameras' tallies %d times and their keys %d times before the sections, want %d and %d", s, l, tc.surveys, tc.lists)
				}
				left, _, err := f.repo.List(t.Context(), images.ListOptions{CameraID: "cam-007", Limit: 10})
				if err != nil {
					t.Fatal(err)
				}
				if held := tc.held != ""; (len(left) == pacedImages) != held || (len(left) == 0) == held {
					t.Errorf("cam-007 has %d images left, held %t", len(left), held)
				}
			})
		})
	}
}

// TestAPurgeThatFitsItsBurstRunsAtOnce: while requests are served, a
// purge whose work fits the burst runs its sections back to back, still
// of about the section time each; one started right after it finds the
// bucket refilled only by the share of the time since, so the two
// together keep to LiveBurst + LiveShare of their span.
func TestAPurgeThatFitsItsBurstRunsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const perCamera = time.Millisecond
		opts := embedded.Options{SectionTime: 4 * time.Millisecond, LiveShare: 0.1, LiveBurst: 200 * time.Millisecond}
		var live atomic.Bool
		live.Store(true)
		f := newPacedFixture(t, opts, &live, func(string) time.Duration { return perCamera })
		j := f.purge(t)
		began := j.Started
		sections := f.purger.spent()
		took, worked := j.Ended.Sub(j.Started), work(sections)
		t.Logf("first purge: %d sections, %s of work in %s", len(sections), worked, took)
		if took > worked {
			t.Errorf("a purge of %s of work within a burst of %s took %s: it rested", worked, opts.LiveBurst, took)
		}
		// The probe, then every camera left in one section: it fits what
		// is left of the burst.
		if len(sections) != 2 || sections[0].days != 16 {
			t.Errorf("sections of %v cameras, want the probe's 16 and one of the rest", daysOf(sections))
		}
		// The same work again at once: 80 ms of the burst left, and what the
		// share refilled since the first began; the rest at a tenth of the
		// time.
		seedPaced(t, f)
		j = f.purge(t)
		second := f.purger.spent()[len(sections):]
		took, worked = j.Ended.Sub(j.Started), work(second)
		last := second[len(second)-1].took
		left := opts.LiveBurst - work(sections) + time.Duration(float64(j.Started.Sub(began))*opts.LiveShare)
		want := time.Duration(float64(worked-last-left) / opts.LiveShare)
		t.Logf("second purge: %d sections, %s of work in %s (%s of burst left)", len(second), worked, took, left)
		if took < want-20*time.Millisecond || took > want+20*time.Millisecond {
			t.Errorf("a second purge right after the first took %s for %s of work, want %s: the burst refills at the share", took, worked, want)
		}
	})
}

func TestSectionsFollowWhatTheyCost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var live atomic.Bool
		live.Store(true)
		opts := embedded.Options{SectionTime: 8 * time.Millisecond, LiveShare: 0.5}
		cost := func(camera string) time.Duration {
			if camera >= fmt.Sprintf("cam-%03d", pacedCameras/2) {
				return 4 * time.Millisecond
			}
			return time.Millisecond
		}
		f := newPacedFixture(t, opts, &live, cost)
		f.purge(t)
		sections := f.purger.spent()
		var cheap, costly []int
		for _, s := range sections[1 : len(sections)-1] {
			switch s.took {
			case time.Duration(s.days) * time.Millisecond:
				cheap = append(cheap, s.days)
			case time.Duration(s.days) * 4 * time.Millisecond:
				costly = append(costly, s.days)
			}
		}
		t.Logf("cameras of cheap sections %v, of costly ones %v", cheap, costly)
		if len(cheap) < 3 || len(costly) < 3 {
			t.Fatalf("want several sections of each cost, got cheap %v, costly %v", cheap, costly)
		}
		// Averaging halves the estimate's error at each section: the cheap
		// ones settle on 8 cameras, the costly ones on 2.
		if n := cheap[len(cheap)-1]; n != 8 {
			t.Errorf("cheap sections settled on %d cameras, want 8", n)
		}
		if n := costly[len(costly)-1]; n != 2 {
			t.Errorf("costly sections settled on %d cameras, want 2", n)
		}
	})
}

// TestAPurgeSpeedsUpWhenRequestsStop: the live pace is asked again at each
// section, so a purge that began while requests were served stops resting
// once they stop.
func TestAPurgeSpeedsUpWhenRequestsStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var live atomic.Bool
		live.Store(true)
		opts := embedded.Options{SectionTime: 2 * time.Millisecond, LiveShare: 0.1}
		f := newPacedFixture(t, opts, &live, func(string) time.Duration { return time.Millisecond })
		time.AfterFunc(300*time.Millisecond, func() { live.Store(false) })
		j := f.purge(t)
		sections := f.purger.spent()
		took := j.Ended.Sub(j.Started)
		t.Logf("%d sections, %s of work in %s", len(sections), work(sections), took)
		// 300 ms of it live (a 16 ms probe, then sections of 2 ms, each
		// with its rest), then what is left unpaced.
		if took > 400*time.Millisecond {
			t.Errorf("purge took %s after requests stopped at 300ms, want well under the 1.2s a live pace takes", took)
		}
		if len(sections) < 5 {
			t.Errorf("%d sections, want the live ones before requests stopped", len(sections))
		}
	})
}

// TestFixedCostsDoNotShrinkSections: what a section costs besides its
// cameras is not taken for their cost, so sections still hold the section
// time's worth of cameras rather than shrinking to one each: its fixed
// part (its job record), and its commit, since after a commit with range
// deletions the store fragments every range deletion in the memtable,
// which grows with each section, not with the section's own cameras
// (counted, it made the sections shrink as a purge went on, each smaller
// one adding one more fragmenting).
func TestFixedCostsDoNotShrinkSections(t *testing.T) {
	for _, tc := range []struct {
		name   string
		fixed  time.Duration
		commit func(before int) time.Duration
	}{
		{"a fixed 5ms", 5 * time.Millisecond, nil},
		{"a commit that grows", 0, func(before int) time.Duration { return time.Duration(before) * time.Millisecond / 2 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var live atomic.Bool
				live.Store(true)
				s := pacedStore{opts: embedded.Options{SectionTime: 4 * time.Millisecond, LiveShare: 0.5, LiveBurst: -1}, live: &live,
					cost: func(string) time.Duration { return time.Millisecond }, fixed: tc.fixed, commit: tc.commit, fs: vfs.NewMem()}
				f := openPacedFixture(t, s)
				seedPaced(t, f)
				f.run(t)
				f.purge(t)
				sections := f.purger.spent()
				for i, sec := range sections[1 : len(sections)-1] {
					if sec.days != 4 {
						t.Errorf("section %d held %d cameras, want 4 (4ms of them, besides %s more)", i+1, sec.days, sec.took-4*time.Millisecond)
					}
				}
			})
		})
	}
}
