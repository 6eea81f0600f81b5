package main

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// op names one kind of call the tool makes; image RPCs are counted together
// across the three image types.
type op string

const (
	opCreate         op = "create"
	opGetLatest      op = "get_latest"
	opBatchGetLatest op = "batch_get_latest"
	opList           op = "list"
	opHealth         op = "health_check"
)

var allOps = []op{opCreate, opGetLatest, opBatchGetLatest, opList, opHealth}

// Latencies are recorded in microseconds, from 1 µs to a minute, to three
// significant digits.
const (
	minLatency = 1
	maxLatency = int64(time.Minute / time.Microsecond)
)

// recorder collects the latencies and errors of one phase of a run. It is
// safe for concurrent use.
type recorder struct {
	started time.Time
	ops     map[op]*opStats
	calls   atomic.Int64
	errors  atomic.Int64
	ended   atomic.Int64 // unix nanoseconds; 0 while running
	// active, when set, is the phase's duration instead of started to
	// ended: the sum of the stretches a phase recorded in, for seeding
	// that runs in steps between measurements.
	active atomic.Int64
}

// opStats is one op's record: the whole phase, and a window that progress
// reads and resets.
type opStats struct {
	mu     sync.Mutex
	all    *hdrhistogram.Histogram
	window *hdrhistogram.Histogram
	codes  map[codes.Code]int64
}

func newRecorder() *recorder {
	r := &recorder{started: time.Now(), ops: map[op]*opStats{}}
	for _, o := range allOps {
		r.ops[o] = &opStats{
			all:    hdrhistogram.New(minLatency, maxLatency, 3),
			window: hdrhistogram.New(minLatency, maxLatency, 3),
			codes:  map[codes.Code]int64{},
		}
	}
	return r
}

// record counts one call of o that took d and ended with err.
func (r *recorder) record(o op, d time.Duration, err error) {
	us := min(max(d.Microseconds(), minLatency), maxLatency)
	s := r.ops[o]
	s.mu.Lock()
	_ = s.all.RecordValue(us)
	_ = s.window.RecordValue(us)
	s.codes[status.Code(err)]++
	s.mu.Unlock()
	r.calls.Add(1)
	if err != nil {
		r.errors.Add(1)
	}
}

// end marks the phase finished, fixing its duration.
func (r *recorder) end() { r.ended.CompareAndSwap(0, time.Now().UnixNano()) }

// addActive counts d toward the phase's duration.
func (r *recorder) addActive(d time.Duration) { r.active.Add(int64(d)) }

func (r *recorder) elapsed() time.Duration {
	if a := r.active.Load(); a != 0 {
		return time.Duration(a)
	}
	if e := r.ended.Load(); e != 0 {
		return time.Unix(0, e).Sub(r.started)
	}
	return time.Since(r.started)
}

// windowP99 is the p99 of every call since the last windowP99, all ops together.
func (r *recorder) windowP99() time.Duration {
	merged := hdrhistogram.New(minLatency, maxLatency, 3)
	for _, s := range r.ops {
		s.mu.Lock()
		merged.Merge(s.window)
		s.window.Reset()
		s.mu.Unlock()
	}
	return time.Duration(merged.ValueAtQuantile(99)) * time.Microsecond
}
