package main

import (
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// callLog keeps every call of a workload with when it started, so windows
// can be cut from the run after it ends: purge-during learns the length of
// the window it compares (the purge's own) only when the purge is over. A
// call is a few words; a run of 1,000 calls/s for half a minute is 30,000.
// It is safe for concurrent use.
type callLog struct {
	mu    sync.Mutex
	calls []loggedCall
}

// loggedCall is one call: its op, when it started, how long it took and
// whether it failed.
type loggedCall struct {
	op     op
	start  time.Time
	took   time.Duration
	failed bool
}

// add records one call; a nil log records nothing.
func (l *callLog) add(o op, start time.Time, took time.Duration, err error) {
	if l == nil {
		return
	}
	l.mu.Lock()
	l.calls = append(l.calls, loggedCall{op: o, start: start, took: took, failed: err != nil})
	l.mu.Unlock()
}

// span is a stretch of time, from (inclusive) to to (exclusive).
type span struct{ from, to time.Time }

func (s span) has(t time.Time) bool { return !t.Before(s.from) && t.Before(s.to) }

// overlap is how much of s lies within o.
func (s span) overlap(o span) time.Duration {
	from, to := s.from, s.to
	if o.from.After(from) {
		from = o.from
	}
	if o.to.Before(to) {
		to = o.to
	}
	return max(to.Sub(from), 0)
}

// allOpsKey names the figures of every op together in a window's report.
const allOpsKey = "all"

// windows compares the calls started while a purge ran with those started
// just before it: "during" is the calls started from the purge's start
// until max(its end, its start + minSpan), "before" the calls started in a
// stretch as long just before its start. ran is the stretch the workload
// made calls in; a window the workload did not fill says how much of it
// it covered.
func (l *callLog) windows(purge span, minSpan time.Duration, ran span) *windowReport {
	length := max(purge.to.Sub(purge.from), minSpan)
	during := span{purge.from, purge.from.Add(length)}
	before := span{purge.from.Add(-length), purge.from}
	w := &windowReport{SpanSeconds: round(length.Seconds())}
	l.mu.Lock()
	w.Before, w.During = l.side(before, ran), l.side(during, ran)
	l.mu.Unlock()
	w.P99Ratio, w.P999Ratio = map[string]float64{}, map[string]float64{}
	for name, d := range w.During.RPCs {
		b, ok := w.Before.RPCs[name]
		if !ok {
			continue
		}
		if b.P99 > 0 {
			w.P99Ratio[name] = round(d.P99 / b.P99)
		}
		if b.P999 > 0 {
			w.P999Ratio[name] = round(d.P999 / b.P999)
		}
	}
	return w
}

// side sums up the calls started within s, per op and all together.
func (l *callLog) side(s span, ran span) windowSide {
	hists := map[string]*hdrhistogram.Histogram{}
	errs := map[string]int64{}
	hist := func(name string) *hdrhistogram.Histogram {
		if hists[name] == nil {
			hists[name] = hdrhistogram.New(minLatency, maxLatency, 3)
		}
		return hists[name]
	}
	for _, c := range l.calls {
		if !s.has(c.start) {
			continue
		}
		us := min(max(c.took.Microseconds(), minLatency), maxLatency)
		for _, name := range []string{string(c.op), allOpsKey} {
			_ = hist(name).RecordValue(us)
			if c.failed {
				errs[name]++
			}
		}
	}
	out := windowSide{CoveredSeconds: round(s.overlap(ran).Seconds()), RPCs: map[string]tailReport{}}
	for name, h := range hists {
		out.RPCs[name] = tailReport{Calls: h.TotalCount(), Errors: errs[name],
			P99: ms(h.ValueAtQuantile(99)), P999: ms(h.ValueAtQuantile(99.9))}
	}
	return out
}
