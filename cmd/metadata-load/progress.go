package main

import (
	"fmt"
	"io"
	"time"

	"github.com/schollz/progressbar/v3"
)

// progress shows a live bar per phase on a terminal: how far the phase is,
// calls per second, errors so far and the p99 of the last half second. A
// nil *progress shows nothing.
type progress struct{ w io.Writer }

// phaseBar is one phase's bar, updated until finish.
type phaseBar struct {
	bar  *progressbar.ProgressBar
	stop chan struct{}
	done chan struct{}
}

const progressTick = 500 * time.Millisecond

// start shows a bar for a phase bounded by lc's call count, else by its
// duration; counts gives the run's calls and errors, rec the phase's recorder.
func (p *progress) start(label string, lc loadConfig, counts func() (int64, int64), rec func() *recorder) *phaseBar {
	if p == nil {
		return nil
	}
	max := lc.ops
	if max == 0 {
		max = lc.duration.Milliseconds()
	}
	b := &phaseBar{
		bar: progressbar.NewOptions64(max,
			progressbar.OptionSetWriter(p.w),
			progressbar.OptionSetWidth(24),
			progressbar.OptionSetPredictTime(false),
			progressbar.OptionClearOnFinish(),
			progressbar.OptionSetDescription(label)),
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
	started := time.Now()
	go func() {
		defer close(b.done)
		tick := time.NewTicker(progressTick)
		defer tick.Stop()
		firstCalls, _ := counts()
		lastCalls := firstCalls
		for {
			select {
			case <-b.stop:
				return
			case <-tick.C:
			}
			calls, errs := counts()
			rate := float64(calls-lastCalls) / progressTick.Seconds()
			lastCalls = calls
			_ = b.bar.Set64(min(max, progressValue(lc, calls-firstCalls, started)))
			b.bar.Describe(fmt.Sprintf("%-14s %8.0f calls/s  %d errors  p99 %v", label, rate, errs, rec().windowP99()))
		}
	}()
	return b
}

func progressValue(lc loadConfig, calls int64, started time.Time) int64 {
	if lc.ops > 0 {
		return calls
	}
	return time.Since(started).Milliseconds()
}

func (b *phaseBar) finish() {
	if b == nil {
		return
	}
	close(b.stop)
	<-b.done
	_ = b.bar.Finish()
}
