package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/types/known/timestamppb"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
)

// defaultMix is mostly writes, as a fleet's traffic is: every camera
// writes every minute, and frontends read a fraction of that.
const defaultMix = "create=60,get-latest=25,batch-get-latest=5,list=10"

// mixFlagNames are the -mix names of the ops a workload may mix.
var mixFlagNames = map[string]op{
	"create": opCreate, "get-latest": opGetLatest, "batch-get-latest": opBatchGetLatest, "list": opList, "health": opHealth,
}

// mix is the weighted choice of the next call.
type mix struct {
	ops     []op
	weights []int
	total   int
}

func parseMix(s string) (mix, error) {
	var m mix
	for f := range strings.SplitSeq(s, ",") {
		name, weight, ok := strings.Cut(strings.TrimSpace(f), "=")
		o, known := mixFlagNames[name]
		w, err := strconv.Atoi(weight)
		if !ok || !known || err != nil || w < 0 || slices.Contains(m.ops, o) {
			return mix{}, fmt.Errorf("-mix: %q is not name=weight with one of create, get-latest, batch-get-latest, list, health", f)
		}
		if w > 0 {
			m.ops, m.weights, m.total = append(m.ops, o), append(m.weights, w), m.total+w
		}
	}
	if m.total == 0 {
		return mix{}, errors.New("-mix: no call has a weight")
	}
	return m, nil
}

func (m mix) pick(rng *rand.Rand) op {
	n := rng.IntN(m.total)
	for i, w := range m.weights {
		if n < w {
			return m.ops[i]
		}
		n -= w
	}
	return m.ops[len(m.ops)-1]
}

// only is the mix restricted to the ops keep accepts.
func (m mix) only(keep func(op) bool) mix {
	var out mix
	for i, o := range m.ops {
		if keep(o) {
			out.ops, out.weights, out.total = append(out.ops, o), append(out.weights, m.weights[i]), out.total+m.weights[i]
		}
	}
	return out
}

// weights is the mix as the report shows it.
func (m mix) weightsByName() map[string]int {
	out := map[string]int{}
	for name, o := range mixFlagNames {
		if i := slices.Index(m.ops, o); i >= 0 {
			out[name] = m.weights[i]
		}
	}
	return out
}

// workload makes the calls of a run against one server.
type workload struct {
	// conns are the connections to the server; a phase's workers take
	// them in turn.
	conns []*clients
	fleet *fleet
	// live hands out the images creates write, from the run's start on.
	live *timeline
	// callTimeout bounds each seeding create (workload calls take theirs
	// from their phase).
	callTimeout time.Duration
	// calls and errors count every call of the run, for progress.
	calls, errors atomic.Int64
}

// worker is what one of a phase's concurrent callers keeps from call to
// call.
type worker struct {
	cl      *clients
	rng     *rand.Rand
	creates *creator
	// ctx is the worker's own child of the run's context: each call's
	// deadline hangs off it, so workers do not contend on registering
	// their calls with one shared parent.
	ctx    context.Context
	cancel context.CancelFunc
}

// worker is the state of a phase's i-th worker, on the i-th connection in turn.
func (w *workload) worker(ctx context.Context, i int) *worker {
	wk := &worker{cl: w.conns[i%len(w.conns)], rng: rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())), creates: w.fleet.creator()}
	wk.ctx, wk.cancel = context.WithCancel(ctx)
	return wk
}

// call makes one call of o and returns its error.
func (w *workload) call(ctx context.Context, wk *worker, o op) error {
	f, rng := w.fleet, wk.rng
	switch o {
	case opCreate:
		img, _ := w.live.take()
		err := wk.creates.create(ctx, wk.cl, img.kind, img.camera, img.at)
		if err == nil {
			f.wrote(img.at)
		}
		return err
	case opGetLatest:
		id := f.ids[f.camera(rng)]
		var err error
		switch f.kind(rng) {
		case single:
			_, err = wk.cl.single.GetLatestSingleImageMetadata(ctx, &metadatav1.GetLatestSingleImageMetadataRequest{CameraId: id})
		case pano:
			_, err = wk.cl.pano.GetLatestPanoImageMetadata(ctx, &metadatav1.GetLatestPanoImageMetadataRequest{CameraId: id})
		case preStitch:
			_, err = wk.cl.preStitch.GetLatestPreStitchImageMetadata(ctx, &metadatav1.GetLatestPreStitchImageMetadataRequest{CameraId: id})
		}
		return err
	case opBatchGetLatest:
		ids := f.batch(rng)
		var err error
		switch f.kind(rng) {
		case single:
			_, err = wk.cl.single.BatchGetLatestSingleImageMetadata(ctx, &metadatav1.BatchGetLatestSingleImageMetadataRequest{CameraIds: ids})
		case pano:
			_, err = wk.cl.pano.BatchGetLatestPanoImageMetadata(ctx, &metadatav1.BatchGetLatestPanoImageMetadataRequest{CameraIds: ids})
		case preStitch:
			_, err = wk.cl.preStitch.BatchGetLatestPreStitchImageMetadata(ctx, &metadatav1.BatchGetLatestPreStitchImageMetadataRequest{CameraIds: ids})
		}
		return err
	case opList:
		id := f.ids[f.camera(rng)]
		from, to := f.listRange(rng)
		start, end, size := timestamppb.New(from), timestamppb.New(to), int32(f.listPageSize)
		var err error
		switch f.kind(rng) {
		case single:
			_, err = wk.cl.single.ListSingleImageMetadata(ctx, &metadatav1.ListSingleImageMetadataRequest{CameraId: id, StartTime: start, EndTime: end, PageSize: size})
		case pano:
			_, err = wk.cl.pano.ListPanoImageMetadata(ctx, &metadatav1.ListPanoImageMetadataRequest{CameraId: id, StartTime: start, EndTime: end, PageSize: size})
		case preStitch:
			_, err = wk.cl.preStitch.ListPreStitchImageMetadata(ctx, &metadatav1.ListPreStitchImageMetadataRequest{CameraId: id, StartTime: start, EndTime: end, PageSize: size})
		}
		return err
	case opHealth:
		_, err := wk.cl.health.Check(ctx, &healthpb.HealthCheckRequest{})
		return err
	}
	return fmt.Errorf("unknown op %s", o)
}

// phase is one measured stretch of calls.
type phase struct {
	label string
	load  loadConfig
	// recorder is where each call is recorded, read when the call starts,
	// so a run can split its calls into phases while it goes.
	recorder func() *recorder
	// onCall, when set, sees the count of calls started so far.
	onCall func(n int64)
	// log, when set, keeps every call with its start.
	log *callLog
	// hold, when set, keeps a phase bounded by its duration going past
	// it until hold is closed: purge-during's window of calls must close
	// before its workload ends.
	hold <-chan struct{}
}

// context is the context of the phase's calls: ctx, ended by the phase's
// duration (and hold, when set).
func (p phase) context(ctx context.Context) (context.Context, context.CancelFunc) {
	if p.load.duration <= 0 {
		return ctx, func() {}
	}
	if p.hold == nil {
		return context.WithTimeout(ctx, p.load.duration)
	}
	runCtx, cancel := context.WithCancel(ctx)
	go func() {
		timer := time.NewTimer(p.load.duration)
		defer timer.Stop()
		select {
		case <-runCtx.Done():
			return
		case <-timer.C:
		}
		select {
		case <-runCtx.Done():
			return
		case <-p.hold:
		}
		cancel()
	}()
	return runCtx, cancel
}

// run makes calls until the phase's duration or call count is reached, or
// ctx ends. Each call has its own deadline, so calls in flight when the
// phase ends finish and are recorded.
func (w *workload) run(ctx context.Context, p phase, show *progress) {
	lc := p.load
	runCtx, cancel := p.context(ctx)
	defer cancel()
	var limiter *rate.Limiter
	if lc.rate > 0 {
		limiter = rate.NewLimiter(rate.Limit(lc.rate), 1)
	}
	bar := show.start(p.label, lc, w.counts, p.recorder)
	defer bar.finish()
	var started atomic.Int64
	var wg sync.WaitGroup
	for i := range lc.concurrency {
		wg.Go(func() {
			wk := w.worker(ctx, i)
			defer wk.cancel()
			for runCtx.Err() == nil {
				n := started.Add(1)
				if lc.ops > 0 && n > lc.ops {
					return
				}
				if limiter != nil && limiter.Wait(runCtx) != nil {
					return
				}
				if p.onCall != nil {
					p.onCall(n)
				}
				w.once(wk, lc.callTimeout, lc.mix.pick(wk.rng), p.recorder(), p.log)
			}
		})
	}
	wg.Wait()
}

// once makes one call of o with its own deadline and records it in rec
// and log.
func (w *workload) once(wk *worker, timeout time.Duration, o op, rec *recorder, log *callLog) {
	callCtx, cancel := context.WithTimeout(wk.ctx, timeout)
	defer cancel()
	start := time.Now()
	err := w.call(callCtx, wk, o)
	took := time.Since(start)
	rec.record(o, took, err)
	log.add(o, start, took, err)
	w.calls.Add(1)
	if err != nil {
		w.errors.Add(1)
	}
}

func (w *workload) counts() (calls, errors int64) { return w.calls.Load(), w.errors.Load() }

// seed creates every image of tl with concurrency creates in flight, as
// fast as the server takes them, recording into rec and adding the time it
// took to rec's duration.
func (w *workload) seed(ctx context.Context, tl *timeline, concurrency int, rec *recorder, show *progress, label string) {
	bar := show.start(label, loadConfig{ops: tl.total}, w.counts, func() *recorder { return rec })
	defer bar.finish()
	started := time.Now()
	defer func() { rec.addActive(time.Since(started)) }()
	var wg sync.WaitGroup
	for i := range concurrency {
		wg.Go(func() {
			wk := w.worker(ctx, i)
			defer wk.cancel()
			// The timeline's fleet may be another than the workload's.
			creates := tl.fleet.creator()
			for ctx.Err() == nil {
				img, ok := tl.take()
				if !ok {
					return
				}
				callCtx, cancel := context.WithTimeout(wk.ctx, w.callTimeout)
				start := time.Now()
				err := creates.create(callCtx, wk.cl, img.kind, img.camera, img.at)
				cancel()
				rec.record(opCreate, time.Since(start), err)
				w.calls.Add(1)
				if err != nil {
					w.errors.Add(1)
				}
			}
		})
	}
	wg.Wait()
}
