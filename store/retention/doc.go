// Package retention retires expired image metadata: the purge engine behind
// the RetentionService. A purge of an image kind deletes every row captured
// before its boundary (the start of the cutoff's minute, or with policies
// each camera's own), both the primary rows and their index rows, and
// counts what it deleted. Each backend purges with its own tools: the
// engine keeps what both share (jobs and their store, leases, cancels, the
// schedule, retirement, pacing, statistics, policies and holds) and asks a
// Driver (driver.go) for the rest, through an Env: the embedded store's
// (package embedded) or the queue design's (package queue), which
// Options.Driver names. A job names the driver that recorded it;
// one of an earlier release, or of the other design, ends failed rather
// than resume on progress its driver does not know, and is started again.
//
// # On the embedded store (package embedded)
//
// The store tallies every primary row in the row's own batch, and a purge
// deletes in exclusive sections that commit each camera's range deletion
// with the job's counts: see store/retention/embedded. Its storage budget
// (embedded's budget.go) measures the live data with the store's own
// accounting and, past its bytes, starts purges of the oldest images
// across the fleet that spare held cameras, through the engine's public
// API: the engine needs no mechanism of its own for it.
//
// # On Azure (package queue)
//
// Azure has no transaction across partitions, so the seeds' design stays:
// a plan sends tasks through a queue to workers on every replica, which
// delete in batches, primary rows first, then a janitor deletes the index
// rows left without their primary rows; see store/retention/queue.
// Package drivers picks the driver of a backend.
//
// # Both
//
// Jobs, policies, legal holds and the kinds' locks are tables of the same
// backend, so every process sees the same ones (jobstore.go,
// policystore.go). What policies, holds and tiers are, which rule a camera
// gets and which image of a thinned interval is kept are the pure package
// policy's, which every path asks: a purge with policies gives each
// camera, per kind, the days of its own policy, else of its longest prefix
// policy, else of the default. A camera on legal hold keeps everything, on
// every path: one Rules (policy_purge.go) reads the policies and holds
// and has policy.Resolve give every camera its rule, hold included, for the
// embedded survey and sections and the queue design's plan and dry run
// (the budget reads the holds through Policies); holds are read whole (holdset.go) at a purge's start and
// again before each section or task. Deletes can be paced by rows (pace.go:
// a process's or a job's cap, and the queue design's LiveRowsPerSecond); a
// purge yields to live traffic (Options.Live), the embedded one by time
// (its package's pace.go), since its cost follows sections, not rows; it
// runs unpaced on an idle store. A job can be
// cancelled (cancel.go), purges scheduled (schedule.go); ended jobs are
// retired after Options.JobRetention. Engine.Run loops on Engine.RunOnce,
// one step that launches every unfinished job this process may run; a test
// calls RunOnce to step the engine instead of waiting for its ticker.
//
// # Deletes on purpose
//
// A delete of every image of one camera (StartRequest.Camera) is a purge
// whose Rules give that camera a boundary after every capture and every
// other camera none, so both drivers' own paths delete, count, resume and
// cancel it; a delete of one image is each driver's ImageDeleter
// (delete.go). Both refuse a camera on legal hold (ErrCameraHeld).
package retention
