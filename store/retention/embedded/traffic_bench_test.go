package embedded_test

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/pebble"
	"github.com/metadatad/metadatad/store/retention"
	"github.com/metadatad/metadatad/store/retention/embedded"
)

var (
	trafficRate    = flag.Float64("traffic-rate", 1000, "BenchmarkPurgeUnderTraffic: calls per second, half creates, half GetLatest")
	trafficShare   = flag.Float64("traffic-live-share", 0, "BenchmarkPurgeUnderTraffic: the purge's live share (0: the default)")
	trafficBurst   = flag.Duration("traffic-live-burst", 0, "BenchmarkPurgeUnderTraffic: the purge's live burst (0: the default; negative: none)")
	trafficSection = flag.Duration("traffic-section-time", 0, "BenchmarkPurgeUnderTraffic: the purge's section time (0: the default)")
)

// BenchmarkPurgeUnderTraffic purges settled expired rows (the layouts of
// bench/postgres-compare.sh: 200,000 over 40 and over 4,000 cameras,
// 100,000 over 10,000) while a steady -traffic-rate of calls, half creates
// of new images of 1,000 other cameras and half GetLatest of them, runs
// against the same store, as the daemon serves them (the engine's Live
// says so). It reports the purge's time and the calls' p99 and p99.9 over
// the purge's span (at least five seconds from its start) against the same
// span just before it. The engine in process, without gRPC: the daemon's
// own figures are bench/purge-under-traffic.sh's.
func BenchmarkPurgeUnderTraffic(b *testing.B) {
	for _, l := range []struct{ rows, cameras int }{{200_000, 40}, {200_000, 4_000}, {100_000, 10_000}} {
		b.Run(fmt.Sprintf("rows=%d/cameras=%d", l.rows, l.cameras), func(b *testing.B) {
			for range b.N {
				runPurgeUnderTraffic(b, l.rows, l.cameras)
			}
		})
	}
}

// call is one timed call of the traffic: when it started and how long it took.
type call struct {
	at   time.Time
	took time.Duration
}

func runPurgeUnderTraffic(b *testing.B, rows, cameras int) {
	b.StopTimer()
	log := slog.New(slog.DiscardHandler)
	db, err := pebble.Open(pebble.Options{Dir: b.TempDir(), Logger: log})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	ctx := b.Context()
	repo, err := images.Open(ctx, db, images.Options{Kind: images.Single})
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now().UTC()
	old := now.AddDate(0, -1, 0)
	var imgs []images.Image
	for i := range rows {
		imgs = append(imgs, images.Image{CameraID: fmt.Sprintf("old-%05d", i%cameras), CapturedAt: old.Add(time.Duration(i) * time.Minute * 1000 / time.Duration(rows)),
			ContentType: "image/jpeg", BlobURI: fmt.Sprintf("https://images.example/old/%d.jpg", i)})
	}
	const live = 1000
	for c := range live {
		imgs = append(imgs, images.Image{CameraID: fmt.Sprintf("live-%04d", c), CapturedAt: now.Add(-time.Hour), ContentType: "image/jpeg"})
	}
	seedAll(b, repo, imgs)
	if err := db.Compact(ctx); err != nil {
		b.Fatal(err)
	}
	opts := embedded.Options{LiveShare: *trafficShare, LiveBurst: *trafficBurst, SectionTime: *trafficSection}
	e, err := retention.Open(ctx, retention.Options{Backend: db, Repositories: []*images.Repository{repo}, Driver: opts.New,
		Logger: log, Live: func() bool { return true }})
	if err != nil {
		b.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { _ = e.Run(runCtx) }()

	tr := &traffic{repo: repo, cameras: live, started: time.Now()}
	trafficDone := make(chan struct{})
	trafficCtx, stopTraffic := context.WithCancel(ctx)
	go func() {
		defer close(trafficDone)
		tr.run(trafficCtx, *trafficRate)
	}()
	time.Sleep(6 * time.Second)
	b.StartTimer()
	began := time.Now()
	j, err := e.Start(ctx, retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: now.AddDate(0, 0, -7)})
	if err != nil {
		b.Fatal(err)
	}
	for !j.State.Terminal() {
		time.Sleep(time.Millisecond)
		if j, err = e.Get(ctx, j.ID); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	took := time.Since(began)
	span := max(took, 5*time.Second)
	time.Sleep(time.Until(began.Add(span + 100*time.Millisecond)))
	stopTraffic()
	<-trafficDone
	if j.State != retention.Succeeded || j.Totals().MetadataRows != int64(rows) {
		b.Fatalf("purge ended %s (%s) with %d rows, want %d", j.State, j.Error, j.Totals().MetadataRows, rows)
	}
	before, during := tr.window(began.Add(-span), began), tr.window(began, began.Add(span))
	b.ReportMetric(took.Seconds(), "purge-s")
	b.ReportMetric(float64(len(during)), "calls-during")
	for _, q := range []float64{99, 99.9} {
		pb, pd := quantile(before, q), quantile(during, q)
		b.ReportMetric(float64(pd.Microseconds())/1000, fmt.Sprintf("p%g-during-ms", q))
		b.ReportMetric(float64(pd)/float64(pb), fmt.Sprintf("p%g-ratio", q))
	}
}

// seedAll creates imgs in batches from a few goroutines.
func seedAll(b *testing.B, repo *images.Repository, imgs []images.Image) {
	var g errgroup.Group
	g.SetLimit(8)
	for chunk := range slices.Chunk(imgs, images.MaxBatchCreate) {
		g.Go(func() error {
			for _, r := range repo.BatchCreate(b.Context(), chunk) {
				if r.Err != nil {
					return r.Err
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
}

// traffic is open-loop calls at a fixed rate: each starts on its tick
// whatever the ones before are doing, as independent clients' do.
type traffic struct {
	repo    *images.Repository
	cameras int
	started time.Time

	mu    sync.Mutex
	calls []call
}

func (t *traffic) run(ctx context.Context, rate float64) {
	interval := time.Duration(float64(time.Second) / rate)
	var wg sync.WaitGroup
	defer wg.Wait()
	for i := 0; ; i++ {
		at := t.started.Add(time.Duration(i) * interval)
		if d := time.Until(at); d > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(d):
			}
		}
		if ctx.Err() != nil {
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			t.one(ctx, i, at)
		}()
	}
}

// one makes the i-th call, scheduled at at: a create of a new image when i
// is even, else a GetLatest; its time counts from at, so a call that could
// not start on time counts its wait.
func (t *traffic) one(ctx context.Context, i int, at time.Time) {
	camera := fmt.Sprintf("live-%04d", (i/2)%t.cameras)
	var err error
	if i%2 == 0 {
		_, err = t.repo.Create(ctx, images.Image{CameraID: camera, CapturedAt: at.Add(-time.Second).Truncate(time.Millisecond), ContentType: "image/jpeg"})
	} else {
		_, err = t.repo.Latest(ctx, camera, images.Span{}, images.Filter{})
	}
	if err != nil && ctx.Err() == nil {
		panic(err)
	}
	took := time.Since(at)
	t.mu.Lock()
	t.calls = append(t.calls, call{at: at, took: took})
	t.mu.Unlock()
}

// window is the times of the calls started in [from, to).
func (t *traffic) window(from, to time.Time) []time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []time.Duration
	for _, c := range t.calls {
		if !c.at.Before(from) && c.at.Before(to) {
			out = append(out, c.took)
		}
	}
	return out
}

// quantile is the q-th percentile of ds by nearest rank; it sorts them.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[max(0, int(math.Ceil(q/100*float64(len(ds))))-1)]
}
