package embedded

import (
	"context"
	"sync"
	"time"

	"github.com/metadatad/metadatad/store/retention"
)

// Pacing by time. On an engine that deletes a camera's expired rows with
// one range deletion, a section's cost follows its cameras, days and the
// rows it must read one by one (the outbox's, the thinned), not the rows
// it deletes: pacing by rows turned milliseconds of work into tens of
// seconds on a live store. So while requests are served a purge works in
// short sections, each sized from the time per unit of work the sections
// before it took, and rests after each in proportion, so that its share of
// the time stays bounded; on an idle store it runs sections back to back
// at their largest (retention.Options.SectionCameras).

// Defaults of Options, chosen by measurement (docs/benchmarks.md, issue 44).
const (
	// DefaultSectionTime keeps a section's exclusive work to about as long
	// as a synced create takes, so that the few requests that meet it wait
	// no longer than for one more create in their group commit.
	DefaultSectionTime = 2 * time.Millisecond
	// DefaultLiveShare is the purge's share of the time while requests
	// are served: 2 ms sections leave 18 ms for the requests.
	DefaultLiveShare = 0.1
)

// Options tune the embedded purge. Zero fields take the defaults.
type Options struct {
	// SectionTime is how long one section's work aims to take while
	// requests are served (retention.Options.Live); default
	// DefaultSectionTime.
	SectionTime time.Duration
	// LiveShare is the most of the time the purge works while requests are
	// served: after a section of d it rests d*(1-LiveShare)/LiveShare
	// before the next (at most maxRest); default DefaultLiveShare, 1 never
	// rests.
	LiveShare float64
}

func (o Options) withDefaults() Options {
	if o.SectionTime <= 0 {
		o.SectionTime = DefaultSectionTime
	}
	if o.LiveShare <= 0 || o.LiveShare > 1 {
		o.LiveShare = DefaultLiveShare
	}
	return o
}

// maxRest bounds one rest, so that a section slowed by something else (a
// compaction, a loaded machine) does not stall the purge for long: a
// cancel waits for the rest to end.
const maxRest = time.Second

// probeUnits is the first live section's size, before any section was
// timed: a few cameras' days.
const probeUnits = 16

// pacer sizes the sections of every job the driver runs and keeps their
// share of the time, across the kinds a job purges at once: one section
// and its rest at a time.
type pacer struct {
	opts Options
	live func() bool
	turn chan struct{} // a section and its rest hold it

	mu      sync.Mutex
	perUnit time.Duration // time a unit of work took, averaged; 0 until timed
}

func newPacer(opts Options, live func() bool) *pacer {
	if live == nil {
		live = func() bool { return false }
	}
	return &pacer{opts: opts.withDefaults(), live: live, turn: make(chan struct{}, 1)}
}

// units is how many units of work the next section may hold while
// requests are served; 0 means no bound (an idle store).
func (p *pacer) units() int64 {
	if !p.live() {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.perUnit <= 0 {
		return probeUnits
	}
	return max(1, int64(p.opts.SectionTime/p.perUnit))
}

// sectionClock times one section: from the start of its exclusive work
// to its end, and the part of it its cameras cost (scan), without what
// every section costs whatever its size (reading the job and the holds,
// writing the job, committing, the memtable's tombstones fragmented anew).
type sectionClock struct {
	began time.Time
	scan  time.Duration
}

// start marks the start of the section's exclusive work.
func (c *sectionClock) start() { c.began = time.Now() }

// scanned adds d of work on the section's cameras.
func (c *sectionClock) scanned(d time.Duration) { c.scan += d }

// section runs a section of units units of work (work), learning the time
// a unit takes from the part its cameras cost, so that a section's fixed
// costs do not shrink the next to a camera or two, and then, while
// requests are served, rests in proportion to the whole section before
// giving the turn to the next section of any job.
func (p *pacer) section(ctx context.Context, units int64, work func(*sectionClock) error) error {
	select {
	case p.turn <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-p.turn }()
	var c sectionClock
	err := work(&c)
	if c.began.IsZero() {
		return err // nothing ran: no time to learn from, none to rest
	}
	took := time.Since(c.began)
	p.learn(units, c.scan)
	if err != nil || !p.live() {
		return err
	}
	return retention.Sleep(ctx, p.rest(took))
}

// learn averages the time a unit of work takes, the latest section
// weighing half: cameras differ in days and rows, and the machine's load
// comes and goes.
func (p *pacer) learn(units int64, took time.Duration) {
	if units <= 0 || took <= 0 {
		return
	}
	per := took / time.Duration(units)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.perUnit <= 0 {
		p.perUnit = per
		return
	}
	p.perUnit = (p.perUnit + per) / 2
}

// rest is the pause after a section that took took, which keeps the
// purge's share at LiveShare.
func (p *pacer) rest(took time.Duration) time.Duration {
	share := p.opts.LiveShare
	return min(maxRest, time.Duration(float64(took)*(1-share)/share))
}
