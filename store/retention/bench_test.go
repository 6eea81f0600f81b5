package retention_test

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/pebble"
	"github.com/metadatad/metadatad/store/retention"
	"github.com/metadatad/metadatad/store/retention/drivers"
	"github.com/metadatad/metadatad/store/retention/queue"
)

// Sizes of the benchmarks. Every purge retires the same expired volume, the
// one knob to turn for a closer look; everything else is laid out around it.
const (
	// benchExpiredRows is how many expired images each purge retires.
	benchExpiredRows = 100_000
	// benchIdleCameras have one recent image each and nothing to purge.
	benchIdleCameras = 10_000
	// benchCameras share the expired rows where the camera count is not
	// what is measured.
	benchCameras = 1_000
	// benchLatencyOps is how many Creates, and as many GetLatests, the
	// idle latency measurement times; the purging one times as many as fit
	// in the purge, up to benchLatencyMaxOps.
	benchLatencyOps    = 5_000
	benchLatencyMaxOps = 200_000
	// benchSeeders is how many goroutines seed at once: Pebble commits their
	// synced writes in groups, so seeding is far faster than one at a time.
	benchSeeders = 64
)

// benchSpan is the capture time the expired images spread over, whatever the
// camera count: every layout has the same index partitions (one per minute)
// holding as many rows each, and differs only in the cameras behind them.
const benchSpan = 1000 * time.Minute

// benchAge is how old the expired images are. The store's clock is set back
// by as much while seeding, so rows look written when they were captured, as
// in life: the janitor leaves index rows younger than IndexLag.
const benchAge = 30 * 24 * time.Hour

// benchRetention puts the cutoff between the expired images and the recent ones.
const benchRetention = 7 * 24 * time.Hour

// benchLayout is what a benchmark seeds: expired images spread evenly over
// cameras and over benchSpan, one recent image per such camera, and idle
// cameras with one recent image and nothing else.
type benchLayout struct {
	expired, cameras, idle int
}

func (l benchLayout) images() int { return l.expired + l.cameras + l.idle }

// kept is how many images of the layout a purge keeps.
func (l benchLayout) kept() int { return l.cameras + l.idle }

func expiredCamera(c int) string { return fmt.Sprintf("cam-%05d", c) }

// benchIdlePrefix starts the ids of cameras without expired images, so a
// counting table can tell whether a purge touches them.
const benchIdlePrefix = "idle-"

// image is the i-th image of the layout.
func (l benchLayout) image(now time.Time, i int) images.Image {
	recent := now.Add(-time.Hour)
	switch {
	case i < l.expired:
		step := benchSpan / time.Duration(l.expired)
		return upload(expiredCamera(i%l.cameras), now.Add(-benchAge+time.Duration(i)*step))
	case i < l.expired+l.cameras:
		c := i - l.expired
		return upload(expiredCamera(c), recent.Add(time.Duration(c)*time.Millisecond))
	default:
		c := i - l.expired - l.cameras
		return upload(fmt.Sprintf("%s%05d", benchIdlePrefix, c), recent.Add(time.Duration(c)*time.Millisecond))
	}
}

// upload is an image as a camera would send it, so rows have a real size.
func upload(camera string, at time.Time) images.Image {
	return images.Image{CameraID: camera, CapturedAt: at, ContentType: "image/jpeg", SizeBytes: 350_000, Width: 1920, Height: 1080,
		BlobURI: fmt.Sprintf("https://images.example/%s/%d.jpg", camera, at.UnixNano())}
}

// writeClock is the store's clock for entity timestamps, set back while seeding.
type writeClock struct{ lag atomic.Int64 }

func (c *writeClock) now() time.Time { return time.Now().Add(-time.Duration(c.lag.Load())) }

// benchStore is a Pebble store on disk holding single images, with a purge
// engine over it.
type benchStore struct {
	clock *writeClock
	db    *pebble.DB
	// repo writes and reads on the bare store, as the server does.
	repo *images.Repository
	// engine runs on the backend under test; watcher reads its jobs on the
	// bare store, so that waiting for a job adds nothing to what is counted.
	engine, watcher *retention.Engine
	cancel          context.CancelFunc
	done            chan struct{}
	close           func()
}

// openBenchStore opens a store in a new directory; wrap, if set, is the
// backend the engine sees, and tune changes the engine's options.
func openBenchStore(b *testing.B, wrap func(store.Backend) store.Backend, tune ...func(*retention.Options, *queue.Options)) *benchStore {
	b.Helper()
	ctx := b.Context()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	s := &benchStore{clock: &writeClock{}}
	db, err := pebble.Open(pebble.Options{Dir: b.TempDir(), Now: s.clock.now, Logger: logger})
	if err != nil {
		b.Fatal(err)
	}
	s.db = db
	s.close = sync.OnceFunc(func() {
		if s.cancel != nil {
			s.cancel()
			<-s.done
		}
		if err := db.Close(); err != nil {
			b.Error(err)
		}
	})
	b.Cleanup(s.close)
	backend := store.Backend(db)
	if wrap != nil {
		backend = wrap(db)
	}
	if s.repo, err = images.Open(ctx, db, images.Options{Kind: images.Single}); err != nil {
		b.Fatal(err)
	}
	purged, err := images.Open(ctx, backend, images.Options{Kind: images.Single})
	if err != nil {
		b.Fatal(err)
	}
	opts := retention.Options{Backend: backend, Repositories: []*images.Repository{purged}, Logger: logger}
	var q queue.Options
	for _, f := range tune {
		f(&opts, &q)
	}
	opts.Driver = drivers.For(opts.Backend, q)
	if s.engine, err = retention.Open(ctx, opts); err != nil {
		b.Fatal(err)
	}
	opts.Backend, opts.Repositories, opts.Driver = db, []*images.Repository{s.repo}, drivers.For(db, q)
	if s.watcher, err = retention.Open(ctx, opts); err != nil {
		b.Fatal(err)
	}
	return s
}

// seed creates the layout's images through the repository, benchSeeders at
// a time, each image's primary and index rows together.
func (s *benchStore) seed(b *testing.B, l benchLayout, now time.Time) {
	b.Helper()
	s.clock.lag.Store(int64(benchAge))
	defer s.clock.lag.Store(0)
	var next atomic.Int64
	g, ctx := errgroup.WithContext(b.Context())
	for range benchSeeders {
		g.Go(func() error {
			for i := int(next.Add(1) - 1); i < l.images(); i = int(next.Add(1) - 1) {
				if _, err := s.repo.Create(ctx, l.image(now, i)); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatalf("seeding: %v", err)
	}
}

// run starts the engine's workers; close stops them.
func (s *benchStore) run(b *testing.B) {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel, s.done = cancel, make(chan struct{})
	go func() {
		defer close(s.done)
		if err := s.engine.Run(ctx); err != nil {
			b.Error(err)
		}
	}()
}

// start starts a purge of the images captured before now-benchRetention,
// with a cap of its own of rowsPerSecond (0: none).
func (s *benchStore) start(b *testing.B, now time.Time, rowsPerSecond float64) *retention.Job {
	b.Helper()
	j, err := s.engine.Start(b.Context(), retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: now.Add(-benchRetention),
		RowsPerSecond: rowsPerSecond})
	if err != nil {
		b.Fatal(err)
	}
	return j
}

// await waits for the job to end and returns it.
func (s *benchStore) await(b *testing.B, id string) *retention.Job {
	b.Helper()
	deadline := time.After(10 * time.Minute)
	for {
		changed := s.engine.Changed()
		j, err := s.watcher.Get(b.Context(), id)
		if err != nil {
			b.Fatal(err)
		}
		if j.State.Terminal() {
			return j
		}
		select {
		case <-changed:
		case <-time.After(10 * time.Millisecond):
		case <-deadline:
			b.Fatalf("job %s still %s after 10m: %+v", id, j.State, j.Totals())
		}
	}
}

// check fails the benchmark unless the purge retired exactly the layout's
// expired images, primary and index rows, and left the extra ones it was
// told were written since.
func (s *benchStore) check(b *testing.B, j *retention.Job, l benchLayout, extra int) {
	b.Helper()
	want := retention.Counts{DevicesTotal: int64(l.cameras), DevicesDone: int64(l.cameras),
		MetadataRows: int64(l.expired), IndexRows: int64(l.expired)}
	if j.State != retention.Succeeded || j.Totals() != want {
		b.Fatalf("purge %s (%s): %+v, want %+v", j.State, j.Error, j.Totals(), want)
	}
	primary, index := s.repo.Tables()
	for _, t := range []store.Table{primary, index} {
		if n := countAll(b, t); n != l.kept()+extra {
			b.Fatalf("%s holds %d rows after the purge, want %d", t.Name(), n, l.kept()+extra)
		}
	}
}

func countAll(b *testing.B, t store.Table) int {
	b.Helper()
	n := 0
	s := store.Scan{}
	for {
		page, err := t.Scan(b.Context(), s)
		if err != nil {
			b.Fatal(err)
		}
		n += len(page.Entities)
		if page.Next == nil {
			return n
		}
		s.Resume = page.Next
	}
}

// benchPurge times b.N purges, each of a new store seeded with l. With
// queue, the engine runs the Azure backend's design on the embedded store
// and the benchmark reports the storage operations per expired row, engine
// bookkeeping included, as on Azure Table Storage; without, the embedded
// purge runs on the bare store, as the daemon's does.
func benchPurge(b *testing.B, l benchLayout, queue bool) {
	var total, c opCounter
	var wrap func(backend store.Backend) store.Backend
	if queue {
		wrap = func(backend store.Backend) store.Backend { return &countingBackend{Backend: backend, c: &c} }
	}
	for range b.N {
		b.StopTimer()
		s := openBenchStore(b, wrap)
		now := time.Now().UTC()
		s.seed(b, l, now)
		s.run(b)
		c.reset()
		b.StartTimer()
		j := s.await(b, s.start(b, now, 0).ID)
		b.StopTimer()
		total.add(&c)
		s.check(b, j, l, 0)
		s.close()
	}
	rows := float64(b.N) * float64(l.expired)
	b.ReportMetric(rows/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/rows, "ns/row")
	b.ReportMetric(float64(total.reads.Load())/rows, "reads/row")
	b.ReportMetric(float64(total.writes.Load())/rows, "writes/row")
	b.ReportMetric(float64(total.watchedOps.Load()), "idle-cam-ops")
}

// BenchmarkPurgeByCameraCount purges the same expired volume spread over
// few and over many cameras, beside benchIdleCameras cameras with nothing
// to purge. The index makes a purge's cost follow its expired rows, so the
// two ns/row figures should be close; their ratio is the figure to watch.
// idle-cam-ops counts the operations on the idle cameras: it must be 0.
func BenchmarkPurgeByCameraCount(b *testing.B) {
	for _, cameras := range []int{100, 10_000} {
		b.Run(fmt.Sprintf("cameras=%d", cameras), func(b *testing.B) {
			benchPurge(b, benchLayout{expired: benchExpiredRows, cameras: cameras, idle: benchIdleCameras}, false)
		})
	}
}

// BenchmarkPurgeAgainstPostgres purges the layouts bench/postgres-compare.sh
// deletes from PostgreSQL with DELETE ... WHERE captured_at < cutoff:
// 200,000 expired rows over 40 and over 4,000 cameras, 100,000 over 10,000,
// one recent row per camera kept; settled (flushed and compacted, as rows a
// month old are) and with the rows still in the memtable. The engine runs
// on the bare store, as the daemon's does. Its rows/s is the figure the
// script sets beside PostgreSQL's.
func BenchmarkPurgeAgainstPostgres(b *testing.B) {
	for _, l := range []benchLayout{{expired: 200_000, cameras: 40}, {expired: 200_000, cameras: 4_000}, {expired: 100_000, cameras: 10_000}} {
		for _, settled := range []bool{true, false} {
			name := fmt.Sprintf("rows=%d/cameras=%d/%s", l.expired, l.cameras, map[bool]string{true: "settled", false: "memtable"}[settled])
			b.Run(name, func(b *testing.B) {
				for range b.N {
					b.StopTimer()
					s := openBenchStore(b, nil)
					now := time.Now().UTC()
					s.seed(b, l, now)
					if settled {
						if err := s.db.Compact(b.Context()); err != nil {
							b.Fatal(err)
						}
					}
					s.run(b)
					b.StartTimer()
					j := s.await(b, s.start(b, now, 0).ID)
					b.StopTimer()
					s.check(b, j, l, 0)
					s.close()
				}
				b.ReportMetric(float64(b.N)*float64(l.expired)/b.Elapsed().Seconds(), "rows/s")
			})
		}
	}
}

// BenchmarkPurgeStorageOps counts a purge's storage operations per expired
// row on Pebble's range and key deletes and on batches alone. A read is a
// Get or one page of a query or scan; a write is one call that changes
// rows, however many (a batch, a range deletion, a key deletion).
func BenchmarkPurgeStorageOps(b *testing.B) {
	l := benchLayout{expired: benchExpiredRows, cameras: benchCameras, idle: benchIdleCameras}
	for _, queue := range []bool{false, true} {
		b.Run(map[bool]string{false: "embedded", true: "queue-batches-only"}[queue], func(b *testing.B) {
			benchPurge(b, l, queue)
		})
	}
}

// BenchmarkLatencyDuringPurge times Creates and GetLatests of the cameras
// being purged, one client alternating the two, first on the idle store and
// then, on the same store right after, while a purge of benchExpiredRows
// (or of the backlog's rows) runs: idle and purging figures of one case are
// seconds apart, so that a machine whose load drifts still gives a fair
// ratio. Cases: the daemon's defaults, where the client's calls are live
// traffic and so the live cap paces the purge; the same purge unpaced, as
// it runs on an idle store; and a lower cap (caps count primary and index
// rows alike, so a cap of R retires about R/2 images a second).
// The purging measurement runs from the purge's start to its end, every
// phase of it, at most benchLatencyMaxOps operations; purge-overlap is the
// share of that measurement the purge ran through (below 1 the purging
// figures are diluted by idle time), purging-ops the operations it timed.
// purge-images/s is the purge's own speed, from its start to its end.
func BenchmarkLatencyDuringPurge(b *testing.B) {
	l := benchLayout{expired: benchExpiredRows, cameras: benchCameras}
	type latencyCase struct {
		name string
		tune func(*retention.Options, *queue.Options)
		// jobRate is the job's own cap; 0 for none.
		jobRate float64
		// settled flushes and compacts the rows before the purge, as rows
		// a month old are; otherwise they are still in the memtable.
		settled bool
		// backlog purges BenchmarkPurgeBacklog's rows and cameras instead
		// of benchExpiredRows over benchCameras: a purge long enough (many
		// sections) that the requests it meets are more than the few a
		// purge of milliseconds overlaps.
		backlog bool
	}
	// The embedded store's purge, as the daemon runs it: paced by its live
	// share, since the client is live traffic (the daemon's server.Traffic
	// would say so), on rows still in the memtable, on settled rows, and on
	// a settled backlog; then unpaced, as on an idle store, and paced lower.
	serving := func(o *retention.Options, _ *queue.Options) { o.Live = func() bool { return true } }
	unpaced := func(*retention.Options, *queue.Options) {}
	cases := []latencyCase{{name: "default", tune: serving},
		{name: "default-settled", tune: serving, settled: true},
		{name: "default-backlog", tune: serving, settled: true, backlog: true},
		{name: "unpaced", tune: unpaced},
		{name: "unpaced-settled", tune: unpaced, settled: true},
		{name: "unpaced-backlog", tune: unpaced, settled: true, backlog: true}}
	for _, rate := range []float64{10_000} {
		cases = append(cases, latencyCase{name: fmt.Sprintf("%.0f-rows-per-s", rate),
			tune: func(o *retention.Options, _ *queue.Options) { o.RowsPerSecond = rate }})
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			l := l
			if c.backlog {
				l = benchLayout{expired: *backlogRows, cameras: *backlogCameras}
			}
			var idle, purging latencySamples
			var overlap, purgeTime float64
			for range b.N {
				b.StopTimer()
				now := time.Now().UTC()
				s := openBenchStore(b, nil, c.tune)
				s.seed(b, l, now)
				if c.settled {
					if err := s.db.Compact(b.Context()); err != nil {
						b.Fatal(err)
					}
				}
				s.run(b)
				b.StartTimer()
				idleOps := idle.measure(b, s, l, now, 0, benchLatencyOps, nil)
				job := s.start(b, now, c.jobRate)
				began := time.Now()
				purgingOps := purging.measure(b, s, l, now, idleOps, benchLatencyMaxOps, func() bool {
					j, err := s.watcher.Get(b.Context(), job.ID)
					if err != nil {
						b.Fatal(err)
					}
					return !j.State.Terminal()
				})
				b.StopTimer()
				ended := time.Now()
				j := s.await(b, job.ID)
				overlap += min(1, float64(j.Ended.Sub(began))/float64(ended.Sub(began)))
				purgeTime += j.Ended.Sub(j.Started).Seconds()
				s.check(b, j, l, idleOps+purgingOps)
				s.close()
			}
			idle.report(b, "idle", nil)
			purging.report(b, "purging", &idle)
			b.ReportMetric(float64(len(purging.creates)), "purging-ops")
			b.ReportMetric(overlap/float64(b.N), "purge-overlap")
			b.ReportMetric(float64(b.N)*float64(l.expired)/purgeTime, "purge-images/s")
		})
	}
}

// latencySamples are the durations of Creates and GetLatests.
type latencySamples struct{ creates, latests []time.Duration }

// measure times up to n Creates, each followed by a GetLatest of its
// camera, while going (nil: always) says to, asked every 100, and returns
// how many it timed; the images captured from first quarter-milliseconds
// on are new rows (captured within the minute before now, so never
// expired, never ahead of the clock).
func (ls *latencySamples) measure(b *testing.B, s *benchStore, l benchLayout, now time.Time, first, n int, going func() bool) int {
	b.Helper()
	for i := range n {
		if going != nil && i%100 == 0 && !going() {
			return i
		}
		img := upload(expiredCamera(i%l.cameras), now.Add(-time.Minute+time.Duration(first+i)*250*time.Microsecond))
		t0 := time.Now()
		if _, err := s.repo.Create(b.Context(), img); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, err := s.repo.Latest(b.Context(), img.CameraID, images.Span{}, images.Filter{}); err != nil {
			b.Fatal(err)
		}
		ls.creates, ls.latests = append(ls.creates, t1.Sub(t0)), append(ls.latests, time.Since(t1))
	}
	return n
}

// report reports the p50 and p99 of each operation under the name and,
// given a baseline, the ratio of each p99 to the baseline's.
func (ls *latencySamples) report(b *testing.B, name string, baseline *latencySamples) {
	create := reportPercentiles(b, name+"-create", ls.creates)
	latest := reportPercentiles(b, name+"-latest", ls.latests)
	if baseline != nil {
		b.ReportMetric(float64(create)/float64(percentile(baseline.creates, 99)), "create-p99-ratio")
		b.ReportMetric(float64(latest)/float64(percentile(baseline.latests, 99)), "latest-p99-ratio")
	}
}

// reportPercentiles reports the median and 99th percentile of the samples,
// by nearest rank, and returns the 99th.
func reportPercentiles(b *testing.B, op string, samples []time.Duration) time.Duration {
	for _, p := range []float64{50, 99} {
		b.ReportMetric(float64(percentile(samples, p).Nanoseconds()), fmt.Sprintf("%s-p%.0f-ns", op, p))
	}
	return percentile(samples, 99)
}

// percentile is the p-th percentile of the samples by nearest rank; it
// sorts them.
func percentile(samples []time.Duration, p float64) time.Duration {
	slices.Sort(samples)
	i := int(math.Ceil(p/100*float64(len(samples)))) - 1
	return samples[max(i, 0)]
}

// opCounter counts storage operations. A read is a Get or one page of a
// query or scan; a write is one call that changes rows, whatever their
// number (a batch, a range deletion, a key deletion).
type opCounter struct {
	reads, writes atomic.Int64
	// watch starts the ids of the cameras that must cost no operation;
	// benchIdlePrefix unless set.
	watch string
	// watchedOps counts operations on the partitions of those cameras.
	watchedOps atomic.Int64
}

func (c *opCounter) reset() {
	c.reads.Store(0)
	c.writes.Store(0)
	c.watchedOps.Store(0)
}

func (c *opCounter) add(o *opCounter) {
	c.reads.Add(o.reads.Load())
	c.writes.Add(o.writes.Load())
	c.watchedOps.Add(o.watchedOps.Load())
}

func (c *opCounter) touch(partitionKeys ...string) {
	watch := cmp.Or(c.watch, benchIdlePrefix)
	for _, pk := range partitionKeys {
		if strings.HasPrefix(pk, watch) {
			c.watchedOps.Add(1)
		}
	}
}

func (c *opCounter) read(partitionKeys ...string) {
	c.reads.Add(1)
	c.touch(partitionKeys...)
}

func (c *opCounter) write(partitionKeys ...string) {
	c.writes.Add(1)
	c.touch(partitionKeys...)
}

// transactingCountingBackend is a countingBackend that keeps Pebble's
// transactions, as the daemon does: a create writes both rows at once, so
// the images have no IndexLag and the plan prepares the sweep.
type transactingCountingBackend struct{ *countingBackend }

func (b transactingCountingBackend) Transact(ctx context.Context, ops []store.TableOp) error {
	b.c.writes.Add(1)
	inner := make([]store.TableOp, len(ops))
	for i, op := range ops {
		inner[i] = op
		if t, ok := op.Table.(*countingTable); ok {
			inner[i].Table = t.Table
		}
	}
	return b.Backend.(store.Transactor).Transact(ctx, inner)
}

// countingBackend counts the operations on every table of a backend, or
// on the table named only. It hides the embedded store's purges: the
// engine on it runs the queue design, whose operations are what it counts.
type countingBackend struct {
	store.Backend
	only string
	c    *opCounter
}

func (b *countingBackend) Table(ctx context.Context, name string) (store.Table, error) {
	t, err := b.Backend.Table(ctx, name)
	if err != nil || b.only != "" && name != b.only {
		return t, err
	}
	return &countingTable{Table: t, c: b.c}, nil
}

type countingTable struct {
	store.Table
	c *opCounter
}

func (t *countingTable) Insert(ctx context.Context, e store.Entity) (store.Entity, error) {
	t.c.write(e.PartitionKey)
	return t.Table.Insert(ctx, e)
}

func (t *countingTable) Upsert(ctx context.Context, e store.Entity, mode store.WriteMode) (store.Entity, error) {
	t.c.write(e.PartitionKey)
	return t.Table.Upsert(ctx, e, mode)
}

func (t *countingTable) Update(ctx context.Context, e store.Entity, mode store.WriteMode, ifMatch string) (store.Entity, error) {
	t.c.write(e.PartitionKey)
	return t.Table.Update(ctx, e, mode, ifMatch)
}

func (t *countingTable) Delete(ctx context.Context, pk, rk, ifMatch string) error {
	t.c.write(pk)
	return t.Table.Delete(ctx, pk, rk, ifMatch)
}

func (t *countingTable) Batch(ctx context.Context, ops []store.Op) error {
	pks := make([]string, len(ops))
	for i, op := range ops {
		pks[i] = op.Entity.PartitionKey
	}
	t.c.write(pks...)
	return t.Table.Batch(ctx, ops)
}

func (t *countingTable) Get(ctx context.Context, pk, rk string) (store.Entity, error) {
	t.c.read(pk)
	return t.Table.Get(ctx, pk, rk)
}

func (t *countingTable) Query(ctx context.Context, q store.Query) (store.Page, error) {
	t.c.read(q.PartitionKey)
	return t.Table.Query(ctx, q)
}

func (t *countingTable) Scan(ctx context.Context, s store.Scan) (store.Page, error) {
	t.c.read()
	page, err := t.Table.Scan(ctx, s)
	for _, e := range page.Entities {
		t.c.touch(e.PartitionKey)
	}
	return page, err
}

// Sizes of BenchmarkPurgeBacklog: a large fleet's first purge of a long
// backlog. The 10M rows over 100,000 cameras take minutes to seed
// on the development machine; the default is a tenth of the rows.
var (
	backlogRows    = flag.Int("backlog-rows", 1_000_000, "BenchmarkPurgeBacklog's expired rows")
	backlogCameras = flag.Int("backlog-cameras", 100_000, "BenchmarkPurgeBacklog's cameras")
)

// BenchmarkPurgeBacklog purges a settled backlog of -backlog-rows over
// -backlog-cameras while one client creates new images back to back, and
// reports the purge's time, the longest create (the exclusive sections
// hold creates), and the peak of the heap in use.
func BenchmarkPurgeBacklog(b *testing.B) {
	l := benchLayout{expired: *backlogRows, cameras: *backlogCameras}
	var purgeTime, longest time.Duration
	var peak uint64
	for range b.N {
		b.StopTimer()
		s := openBenchStore(b, nil)
		now := time.Now().UTC()
		s.seed(b, l, now)
		if err := s.db.Compact(b.Context()); err != nil {
			b.Fatal(err)
		}
		s.run(b)
		runtime.GC()
		stop := make(chan struct{})
		var wg sync.WaitGroup
		var created atomic.Int64
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				began := time.Now()
				if _, err := s.repo.Create(context.Background(), upload(fmt.Sprintf("live-%d", i%100), now.Add(time.Duration(i)*time.Millisecond))); err != nil {
					b.Error(err)
					return
				}
				if d := time.Since(began); d > longest {
					longest = d
				}
				created.Add(1)
			}
		})
		wg.Go(func() {
			var m runtime.MemStats
			for {
				select {
				case <-stop:
					return
				case <-time.After(5 * time.Millisecond):
				}
				runtime.ReadMemStats(&m)
				peak = max(peak, m.HeapInuse)
			}
		})
		b.StartTimer()
		began := time.Now()
		j := s.await(b, s.start(b, now, 0).ID)
		purgeTime += time.Since(began)
		b.StopTimer()
		close(stop)
		wg.Wait()
		s.check(b, j, l, int(created.Load()))
		s.close()
	}
	b.ReportMetric(purgeTime.Seconds()/float64(b.N), "purge-s")
	b.ReportMetric(float64(longest.Microseconds())/1000, "longest-create-ms")
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
}
