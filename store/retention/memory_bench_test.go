package retention_test

import (
	"context"
	"flag"
	"fmt"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/retention"
	"github.com/metadatad/metadatad/store/retention/queue"
)

// The fleets BenchmarkPurgeMemory compares, as cameras x expired rows, and
// the queue design's Options.CameraMemory: by default below both fleets, so that
// both show the bound. The flags run other sizes, such as the issue's
// 100,000 cameras under the default bound (-purge-memory-bound 8388608),
// too slow for a routine run on two cores.
var (
	purgeMemorySizes = flag.String("purge-memory-sizes", "1000x20000,20000x20000", "BenchmarkPurgeMemory's fleets, as comma-separated CAMERASxROWS")
	purgeMemoryBound = flag.Int("purge-memory-bound", 64<<10, "BenchmarkPurgeMemory's Options.CameraMemory, in bytes")
)

// BenchmarkPurgeMemory purges the same expired volume spread over fleets of
// different sizes and reports the purge's peak live heap above the heap
// before it (sampled at every collection, the collector made to run at 5%
// growth so it samples often), the plan's buckets, and the task documents
// read per task: the wait reads each task about once however many there
// are (it used to read them all at every wake), and the plan reads them
// once per bucket.
func BenchmarkPurgeMemory(b *testing.B) {
	type size struct{ cameras, expired int }
	var sizes []size
	for _, f := range strings.Split(*purgeMemorySizes, ",") {
		var sz size
		if _, err := fmt.Sscanf(f, "%dx%d", &sz.cameras, &sz.expired); err != nil {
			b.Fatalf("-purge-memory-sizes: %q is not CAMERASxROWS", f)
		}
		sizes = append(sizes, sz)
	}
	for _, sz := range sizes {
		b.Run(fmt.Sprintf("cameras=%d/rows=%d", sz.cameras, sz.expired), func(b *testing.B) {
			l := benchLayout{expired: sz.expired, cameras: sz.cameras}
			var taskReads atomic.Int64
			wrap := func(backend store.Backend) store.Backend { return &taskReadCounter{Backend: backend, docs: &taskReads} }
			var peak, tasks, buckets float64
			for range b.N {
				b.StopTimer()
				s := openBenchStore(b, wrap, func(_ *retention.Options, q *queue.Options) { q.CameraMemory = *purgeMemoryBound })
				now := time.Now().UTC()
				s.seed(b, l, now)
				s.run(b)
				taskReads.Store(0)
				sampler := startHeapSampler()
				b.StartTimer()
				j := s.await(b, s.start(b, now, 0).ID)
				b.StopTimer()
				peak = max(peak, float64(sampler.stop()))
				s.check(b, j, l, 0)
				tasks = float64((sz.cameras + queue.DefaultGroupSize - 1) / queue.DefaultGroupSize)
				buckets = float64(max(queue.PlanBuckets(j.Kinds[0]), 1))
				s.close()
			}
			b.ReportMetric(peak/(1<<20), "peak-live-MiB")
			b.ReportMetric(buckets, "buckets")
			b.ReportMetric(float64(taskReads.Load())/tasks, "task-docs-read/task")
		})
	}
}

// heapSampler records the largest live heap, as of each collection, above
// the live heap at its start.
type heapSampler struct {
	base    uint64
	peak    atomic.Uint64
	done    chan struct{}
	stopped chan struct{}
	gogc    int
}

const liveHeap = "/gc/heap/live:bytes"

func readLiveHeap() uint64 {
	s := []metrics.Sample{{Name: liveHeap}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func startHeapSampler() *heapSampler {
	runtime.GC()
	h := &heapSampler{base: readLiveHeap(), done: make(chan struct{}), stopped: make(chan struct{}), gogc: debug.SetGCPercent(5)}
	go func() {
		defer close(h.stopped)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			if live := readLiveHeap(); live > h.base && live-h.base > h.peak.Load() {
				h.peak.Store(live - h.base)
			}
			select {
			case <-h.done:
				return
			case <-tick.C:
			}
		}
	}()
	return h
}

// stop ends the sampling and returns the peak above the start.
func (h *heapSampler) stop() uint64 {
	close(h.done)
	<-h.stopped
	debug.SetGCPercent(h.gogc)
	return h.peak.Load()
}

// taskReadCounter counts the task documents the engine reads.
type taskReadCounter struct {
	store.Backend
	docs *atomic.Int64
}

func (b *taskReadCounter) Table(ctx context.Context, name string) (store.Table, error) {
	t, err := b.Backend.Table(ctx, name)
	if err != nil || name != queue.DefaultTasksTable {
		return t, err
	}
	return &countedTaskTable{Table: t, docs: b.docs}, nil
}

type countedTaskTable struct {
	store.Table
	docs *atomic.Int64
}

func (t *countedTaskTable) Get(ctx context.Context, pk, rk string) (store.Entity, error) {
	t.docs.Add(1)
	return t.Table.Get(ctx, pk, rk)
}

func (t *countedTaskTable) Query(ctx context.Context, q store.Query) (store.Page, error) {
	page, err := t.Table.Query(ctx, q)
	t.docs.Add(int64(len(page.Entities)))
	return page, err
}
