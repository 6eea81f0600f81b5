package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// runner carries one invocation through its phases into its report.
type runner struct {
	cfg  config
	w    *workload
	show *progress
	rep  *report
	// now is the start of the run; the fleet's history ends at its minute.
	now time.Time
	// seeded records every seeding create of the run.
	seeded *recorder
	// seedFleet is the fleet seeding writes the -days of history for: the
	// -purge-cameras fleet when there is one, else the workload's own.
	seedFleet *fleet
	// serverPID is the server's process when it runs on this machine
	// (0 when not, or not visible), or why it could not be looked for.
	serverPID    int
	serverPIDErr error
}

func execute(ctx context.Context, cfg config, conns []*clients, show *progress) (*report, error) {
	f := newFleet(cfg.fleet, rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())))
	now := time.Now()
	nowAt := f.at(now)
	f.oldest = nowAt
	f.newest.Store(nowAt.UnixNano())
	r := &runner{
		cfg: cfg, show: show, now: nowAt,
		w: &workload{conns: conns, fleet: f, callTimeout: cfg.load.callTimeout,
			live: &timeline{fleet: f, start: nowAt.Add(time.Minute), step: time.Minute}},
		rep: &report{Mode: cfg.mode, Target: cfg.client.Addr, StartedAt: now.UTC(), Config: reportConfig{
			Cameras: cfg.fleet.cameras, Mix: cfg.load.mix.weightsByName(), Concurrency: cfg.load.concurrency,
			Rate: cfg.load.rate, DurationSeconds: cfg.load.duration.Seconds(), Ops: cfg.load.ops, Days: cfg.days,
			SeedIntervalSecond: cfg.seedInterval.Seconds(), Conns: cfg.conns, TLS: cfg.client.Secure(),
			Token: cfg.client.SendsToken(),
		}},
		seeded: newRecorder(), seedFleet: f,
	}
	if cfg.purgeFleet.cameras > 0 {
		r.seedFleet = newFleet(cfg.purgeFleet, rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())))
		r.rep.Config.PurgeCameras = cfg.purgeFleet.cameras
	}
	if cfg.mode == "purge-during" {
		r.rep.Config.MinSpanSeconds = cfg.minSpan.Seconds()
	}
	for _, k := range cfg.fleet.kinds {
		r.rep.Config.Types = append(r.rep.Config.Types, k.String())
	}
	r.serverPID = cfg.serverPID
	if r.serverPID == 0 {
		r.serverPID, r.serverPIDErr = localServerPID(cfg.client.Addr)
	}
	err := r.mode(ctx)
	r.rep.Errors = r.w.errors.Load()
	if err == nil && ctx.Err() != nil {
		err = fmt.Errorf("interrupted: %w", ctx.Err())
	}
	return r.rep, err
}

func (r *runner) mode(ctx context.Context) error {
	switch r.cfg.mode {
	case "ceiling":
		r.rep.Ceiling = r.ceiling(ctx)
		return nil
	case "seed":
		return r.seed(ctx, 0, r.cfg.days)
	case "history":
		return r.history(ctx)
	case "purge-during":
		if !r.cfg.skipSeed {
			if err := r.seed(ctx, 0, r.cfg.days); err != nil {
				return err
			}
		} else if r.seedFleet == r.w.fleet {
			// Lists range over the history an earlier seed run wrote.
			r.w.fleet.oldest = r.now.Add(-time.Duration(r.cfg.days) * 24 * time.Hour)
		}
		return r.purgeDuring(ctx)
	case "soak":
		return r.soak(ctx)
	default:
		return r.workload(ctx)
	}
}

// seed writes the seed fleet's history between fromDays and toDays ago (a
// -purge-cameras fleet's only until -purge-older-than ago), then the
// workload fleet's images of the run's first minute (once per run), so
// every camera the workload reads has a newest image.
func (r *runner) seed(ctx context.Context, fromDays, toDays int) error {
	f, h := r.w.fleet, r.seedFleet
	if toDays > fromDays {
		span := time.Duration(toDays-fromDays) * 24 * time.Hour
		if h != f {
			// A fleet of its own for the purge: all its history expired.
			span -= r.cfg.purgeAge
		}
		tl := &timeline{fleet: h, start: r.now.Add(-time.Duration(toDays) * 24 * time.Hour), step: r.cfg.seedInterval,
			total: int64(span/r.cfg.seedInterval) * int64(h.cameras*len(h.kinds))}
		r.w.seed(ctx, tl, r.cfg.seedConcurrency, r.seeded, r.show, fmt.Sprintf("seed %d-%dd", fromDays, toDays))
		if h == f {
			f.oldest = tl.start
		}
	}
	if fromDays == 0 {
		r.w.seed(ctx, &timeline{fleet: f, start: r.now, step: time.Minute, total: int64(f.cameras * len(f.kinds))},
			r.cfg.seedConcurrency, r.seeded, r.show, "seed now")
	}
	r.rep.Seed = r.seeded.summary()
	if n := r.rep.Seed.Errors; n > 0 {
		return fmt.Errorf("seeding failed %d of %d creates: %v", n, r.rep.Seed.Calls, r.rep.Seed.ErrorsByCode)
	}
	return nil
}

// ceiling measures health checks alone at the workload's concurrency and
// bounds: what the framework costs with no storage behind it.
func (r *runner) ceiling(ctx context.Context) *phaseReport {
	lc := r.cfg.load
	lc.mix, lc.rate = mix{ops: []op{opHealth}, weights: []int{1}, total: 1}, 0
	return r.measure(ctx, "health", lc)
}

// measure runs one phase of lc into a recorder of its own and reports it,
// with the CPU the tool and the server spent on it.
func (r *runner) measure(ctx context.Context, label string, lc loadConfig) *phaseReport {
	rec := newRecorder()
	cpu := startCPU(r.serverPID)
	r.w.run(ctx, phase{label: label, load: lc, recorder: func() *recorder { return rec }}, r.show)
	rec.end()
	p := rec.summary()
	p.CPU = cpu.finish(p.Calls)
	return p
}

// workload runs the mixed workload, after the ceiling when asked, and
// compares the two.
func (r *runner) workload(ctx context.Context) error {
	if err := r.seed(ctx, 0, r.cfg.days); err != nil {
		return err
	}
	if r.cfg.ceiling {
		r.rep.Ceiling = r.ceiling(ctx)
	}
	r.rep.Workload = r.measure(ctx, r.cfg.mode, r.cfg.load)
	if c := r.rep.Ceiling; c != nil && c.PerSecond > 0 {
		r.rep.Ratios = map[string]float64{"throughput_vs_health": round(r.rep.Workload.PerSecond / c.PerSecond)}
		latencyRatios(r.rep.Workload, c, p50, string(opHealth), "_p50_vs_health", r.rep.Ratios)
		latencyRatios(r.rep.Workload, c, p99, string(opHealth), "_p99_vs_health", r.rep.Ratios)
	}
	return nil
}

// soak is the workload with the server's memory watched; any failed call
// fails the run.
func (r *runner) soak(ctx context.Context) error {
	if r.serverPIDErr != nil {
		return fmt.Errorf("finding the server process: %w", r.serverPIDErr)
	}
	var rss *rssSampler
	if r.serverPID > 0 {
		rss = sampleRSS(r.serverPID, r.cfg.rssInterval)
	}
	err := r.workload(ctx)
	if rss != nil {
		r.rep.RSS = rss.finish()
	}
	if err != nil {
		return err
	}
	if n := r.w.errors.Load(); n > 0 {
		return fmt.Errorf("soak: %d calls failed: %v", n, r.rep.Workload.ErrorsByCode)
	}
	return nil
}

// history seeds deeper and deeper history and measures the mix's reads at
// each depth: a read's cost must not grow with the rows behind it.
func (r *runner) history(ctx context.Context) error {
	reads := r.cfg.load.mix.only(func(o op) bool { return o != opCreate && o != opHealth })
	if reads.total == 0 {
		return errors.New("history measures reads: give -mix some of get-latest, batch-get-latest, list")
	}
	lc := r.cfg.load
	lc.mix = reads
	from := 0
	for _, days := range r.cfg.historyDays {
		if err := r.seed(ctx, from, days); err != nil {
			return err
		}
		from = days
		// A ceiling at every depth, just before its reads, shares their
		// moment's noise on a shared machine.
		var ceiling *phaseReport
		if r.cfg.ceiling {
			ceiling = r.ceiling(ctx)
		}
		measured := r.measure(ctx, fmt.Sprintf("reads at %dd", days), lc)
		step := historyStep{Days: days, Images: int64(time.Duration(days)*24*time.Hour/r.cfg.seedInterval) + 1, Reads: measured, Ceiling: ceiling}
		if ceiling != nil {
			step.VsHealth = map[string]float64{}
			latencyRatios(step.Reads, ceiling, p50, string(opHealth), "_p50_vs_health", step.VsHealth)
			latencyRatios(step.Reads, ceiling, p99, string(opHealth), "_p99_vs_health", step.VsHealth)
		}
		if len(r.rep.History) > 0 {
			step.P99VsFirst = map[string]float64{}
			latencyRatios(step.Reads, r.rep.History[0].Reads, p99, "", "", step.P99VsFirst)
		}
		r.rep.History = append(r.rep.History, step)
		if ctx.Err() != nil {
			return nil
		}
	}
	return nil
}
