// Package retention retires expired image metadata: the purge engine behind
// the RetentionService. A purge of an image kind deletes every row captured
// before its boundary (the start of the cutoff's minute, or with policies
// each camera's own), both the primary rows and their index rows, and
// counts what it deleted. Each backend purges with its own tools: the
// engine keeps what both share (jobs and their store, leases, cancels, the
// schedule, retirement, pacing, statistics, policies and holds) and asks a
// Driver (driver.go) for the rest, through an Env: the embedded store's
// (package embedded, which Options.Driver names) or the queue design's
// (queue.go, the default). A job names the driver that recorded it;
// one of an earlier release, or of the other design, ends failed rather
// than resume on progress its driver does not know, and is started again.
//
// # On the embedded store (package embedded)
//
// The store tallies every primary row in the row's own batch, and a purge
// deletes in exclusive sections that commit each camera's range deletion
// with the job's counts: see store/retention/embedded. A storage budget
// (budget.go) measures the live data with the store's own accounting and,
// past its bytes, starts purges of the oldest hour across the fleet that
// spare held cameras, so it needs no mechanism of its own.
//
// # On Azure (plan.go, work.go, indexdelete.go, janitor.go)
//
// Azure has no transaction across partitions, so the seeds' design stays,
// each step resumable because its progress lives in tables:
//
//  1. plan: one range scan over the expired index partitions, by keys alone
//     (ours and the fleet's), finds the cameras with expired rows and sends
//     tasks of Options.GroupSize cameras through the queue, so its cost
//     follows the expired volume;
//  2. work: workers on every replica take tasks (at-least-once, hidden
//     while they run), count each camera's expired rows, record the count,
//     then delete them in batches of 100, each batch's index rows after it
//     by derived key (either form). The count, of primary rows and one
//     index row each, is fixed first, so a redelivery that finds rows gone
//     keeps it exact; primary rows go first, so a crash leaves index rows
//     without primary rows, never the reverse; the range is read until
//     empty, so a row a retried create rewrote goes too (one whose primary
//     write lands after that read stays unindexed till a later purge).
//     A task's last delivery gives up the cameras it cannot purge. A
//     camera with thinning tiers also has its rows of their windows read,
//     each interval's keeper kept and the others deleted the same way
//     (thinQueried): the plan scans the index up to the newest thinned day;
//  3. janitor: then a scan of the expired index partitions deletes, at the
//     ETag it read, each index row without its primary row and older than
//     images.Repository.IndexLag (a younger one may still get it). It
//     counts nothing: its rows were counted with their primary rows (a
//     crash left them) or never had one (a create that gave up).
//
// With Options.Outbox the deletes of step 2 write their outbox rows pending
// before each batch and ready after it, and a job's end settles and seals
// its outbox (outboxseal.go), so the blob side hears of each deletion once.
//
// A job's lease passes to another replica when its owner stops renewing it;
// the owner's every write of the job and its tasks holds only at its lease
// epoch (owner.go), so an owner that stalled and woke writes nothing more.
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
// embedded survey and sections, the queue design's plan and dry run, and
// the budget; holds are read whole (holdset.go) at a purge's start and
// again before each section or task (spareHeld). Deletes can be paced (pace.go): a purge
// yields to live traffic (Options.Live, LiveRowsPerSecond), since on the
// machine that serves requests its sections' commits and CPU lift their
// tail latency; it runs unpaced on an idle store. A job can be
// cancelled (cancel.go), purges scheduled (schedule.go); ended jobs are
// retired after Options.JobRetention. Engine.Run loops on Engine.RunOnce,
// one step that launches every unfinished job this process may run; a test
// calls RunOnce to step the engine instead of waiting for its ticker.
package retention
