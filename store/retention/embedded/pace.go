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
// before it took, and its exclusive work is metered by a token bucket
// (workBucket): up to LiveBurst of it back to back, then
// LiveShare of the time, resting after each section until the bucket
// allows it; on an idle store it runs sections back to back at their
// largest (retention.Options.SectionCameras).
//
// Why a burst: a request meets one section at a time, and how many
// requests meet one follows the purge's work, not its share; the share
// decides how long the purge lasts. A purge of a few tens of milliseconds
// paced to a tenth lasted ten times as long and slowed no fewer calls
// (docs/benchmarks.md, issue 44). So a purge whose work fits the burst
// runs at once, and a long one keeps its share: in any span T the purges
// work at most LiveBurst + LiveShare*T while requests are served. The
// burst is small because the requests met a longer one worse, above all
// the commit of many cameras' deletions at once (DefaultLiveBurst).

// Defaults of Options, chosen by measurement (docs/benchmarks.md, issue 44).
const (
	// DefaultSectionTime keeps a section's exclusive work to about as long
	// as a synced create takes, so that the few requests that meet it wait
	// no longer than for one more create in their group commit.
	DefaultSectionTime = 2 * time.Millisecond
	// DefaultLiveShare is the purge's share of the time while requests
	// are served, past its burst: 2 ms sections leave 18 ms for the
	// requests.
	DefaultLiveShare = 0.1
	// DefaultLiveBurst is the exclusive work a purge does back to back
	// while requests are served before its share binds: a purge of about
	// a thousand cameras of a day (15 µs each under traffic) runs at
	// once. At 40 ms (in sections as long as the burst left) a purge of
	// 4,000 cameras ran within it, but the requests' p99 and p99.9 over
	// it rose 1.6 and 1.8 times, and over a purge of 10,000 cameras'
	// p99.9 3.5 times; at 20 ms, 1.4 and 1.8 times.
	DefaultLiveBurst = 20 * time.Millisecond
)

// Options tune the embedded purge. Zero fields take the defaults.
type Options struct {
	// SectionTime is how long one section's work aims to take while
	// requests are served (retention.Options.Live); default
	// DefaultSectionTime.
	SectionTime time.Duration
	// LiveShare is the most of the time the purge works while requests are
	// served, once its burst is spent: after a section of d it rests
	// d*(1-LiveShare)/LiveShare before the next (at most maxRest at a
	// time); default DefaultLiveShare, 1 never rests.
	LiveShare float64
	// LiveBurst is how much exclusive work the purges do back to back
	// while requests are served before LiveShare binds; it refills at
	// LiveShare. Default DefaultLiveBurst; negative, none.
	LiveBurst time.Duration
}

func (o Options) withDefaults() Options {
	if o.SectionTime <= 0 {
		o.SectionTime = DefaultSectionTime
	}
	if o.LiveShare <= 0 || o.LiveShare > 1 {
		o.LiveShare = DefaultLiveShare
	}
	switch {
	case o.LiveBurst == 0:
		o.LiveBurst = DefaultLiveBurst
	case o.LiveBurst < 0:
		o.LiveBurst = 0
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

	// mu guards perUnit and work: the kinds of a job size their next
	// sections while another's runs.
	mu      sync.Mutex
	perUnit time.Duration // time a unit of work took, averaged; 0 until timed
	// work meters the sections' exclusive work while requests are
	// served.
	work workBucket
}

func newPacer(opts Options, live func() bool) *pacer {
	if live == nil {
		live = func() bool { return false }
	}
	opts = opts.withDefaults()
	return &pacer{opts: opts, live: live, turn: make(chan struct{}, 1),
		work: workBucket{share: opts.LiveShare, burst: opts.LiveBurst}}
}

// units is how many units of work the next section may hold while
// requests are served; 0 means no bound (an idle store).
// Past the probe a section holds SectionTime's worth, or what is left of
// the burst if more: each section's commit has the memtable fragment all
// its range deletions anew, so the same work back to back in sections of
// SectionTime cost a purge of 4,000 cameras 1.7 times as long, the
// requests' p99 no better (docs/benchmarks.md, issue 44).
func (p *pacer) units() int64 {
	if !p.live() {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.perUnit <= 0 {
		return probeUnits
	}
	return max(1, int64(max(p.opts.SectionTime, p.work.left(time.Now()))/p.perUnit))
}

// sectionClock times one section: from the start of its exclusive work
// to its end, and the part of it its cameras cost (scan), without what
// every section costs whatever its size (reading the job and the holds,
// writing the job, committing, the memtable's tombstones fragmented anew).
// (Counting the commit too, whose apply does follow the section's deletes,
// made the sections shrink as a purge went on wherever it deleted by range:
// the fragmenting that follows the commit grows with every range deletion
// in the memtable, not with the section's; docs/benchmarks.md, issue 44.)
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
// requests are served, rests as the work bucket says before giving the
// turn to the next section of any job.
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
	now := time.Now()
	p.learn(units, c.scan)
	if err != nil || !p.live() {
		return err
	}
	p.mu.Lock()
	rest := p.work.spend(c.began, now)
	p.mu.Unlock()
	return retention.Sleep(ctx, rest)
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

// workBucket is a token bucket of exclusive work: it holds up to burst,
// refilled at share of the time that passes, and a section's work is
// taken from it once done (a section is timed after it ran, and may
// outgrow the burst, which golang.org/x/time/rate's reservations cannot
// take). Without a burst, a section of d rests d*(1-share)/share.
type workBucket struct {
	share  float64
	burst  time.Duration
	tokens time.Duration // below 0: a debt the rest pays
	at     time.Time     // of the last spend; zero: full
}

// spend takes the work of a section that ran from start to end, and
// returns the rest that pays its debt, at most maxRest: a debt beyond is
// forgiven, so that a section slowed by something else (a compaction, a
// loaded machine) does not stall the purge for long (a cancel waits for a
// rest to end). The bucket refills during the section too: without a
// burst, a section of d rests d*(1-share)/share.
func (b *workBucket) spend(start, end time.Time) time.Duration {
	if b.at.IsZero() {
		b.tokens = b.burst
	} else {
		b.tokens = min(b.burst, b.tokens+b.refill(start.Sub(b.at)))
	}
	work := end.Sub(start)
	b.at = end
	b.tokens += b.refill(work) - work
	if b.tokens >= 0 {
		return 0
	}
	rest := min(maxRest, time.Duration(float64(-b.tokens)/b.share))
	// The rest refills the bucket by its end: so the next spend counts
	// from here, not from its end.
	b.tokens = -b.refill(rest)
	return rest
}

// left is the work the bucket holds at now, unspent.
func (b *workBucket) left(now time.Time) time.Duration {
	if b.at.IsZero() {
		return b.burst
	}
	return max(0, min(b.burst, b.tokens+b.refill(now.Sub(b.at))))
}

// refill is what d of time adds to the bucket.
func (b *workBucket) refill(d time.Duration) time.Duration {
	return time.Duration(float64(d) * b.share)
}
