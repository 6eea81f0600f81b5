// Package retention retires expired image metadata: the purge engine behind
// the RetentionService.
//
// A purge of one image kind runs in three phases, each resumable after a
// crash because its progress lives in the store, not in memory:
//
//  1. plan: one range scan over the index table's capture-minute partitions
//     older than the cutoff's minute finds the cameras with expired rows
//     (images.Repository.EachIndexRow: the index rows' keys alone, in
//     either key form; store/images owns the index layout);
//     they are grouped into tasks of up to GroupSize cameras, each recorded
//     and sent through the queue. The scan's cost follows the expired
//     volume; cameras without expired rows cost nothing.
//  2. work: workers take tasks from the queue (at-least-once), count each
//     camera's expired primary rows, record the counts, then delete the rows
//     (one range deletion per camera where the backend can, else query and
//     batches of 100). Counting before deleting keeps counts exact when a
//     redelivered task finds its rows already gone. A task's last delivery
//     (Options.MaxAttempts) gives up each camera it still cannot count,
//     check for a hold or delete: counted failed, it keeps its rows for
//     the next purge. A task whose record that delivery cannot write is
//     marked lost on its job, which then fails: no partition that keeps
//     failing holds a job, and its kinds' locks, for ever.
//  3. sweep: once every task is done, a second scan of the expired index
//     partitions, by keys alone, deletes the index rows of the cameras
//     whose primary rows are gone, so no primary row ever loses its index
//     row. A partition whose every row qualifies goes in one range
//     tombstone where the backend can (Pebble), fenced: only if nothing
//     wrote the partition since before the sweep read it, so an image
//     written late into it keeps its index row (see sweepRange). Other
//     rows, and the rows of a partition the fence refused, are deleted one
//     by one, each conditional on the ETag the scan read, so a row
//     rewritten since by a retried create stays for the next purge. Each
//     chunk of deletes is announced on the job (an intent) before it runs,
//     so a crash between the delete and its count neither loses nor
//     doubles the count.
//
// On the embedded store the plan's scan also prepares the sweep
// (sweepplan.go): fenced before it reads, it counts each partition's rows
// and hands the sweep chunks of partitions, which the sweep deletes whole
// without reading them again, each only if nothing wrote it since that
// fence; a chunk something wrote (an old image uploaded late) is swept by
// reading it, as above. The fence lives in memory: a sweep after a restart,
// or of a plan that took more than one scan, reads.
//
// So on the embedded store a purge reads each expired index key once, in
// the plan's scan, and each primary key twice: in its camera's count and in
// the range deletion that counts what it removes, which keeps the counts
// exact when creates of expired instants land meanwhile. A sweep that
// reads the index (after a restart, or a chunk written since the plan)
// reads its keys a second time; index rows written within IndexGrace of the
// purge then cost one more read each, of their primary row.
//
// A purge holds a constant in memory, whatever its cameras and rows: at
// most Options.CameraMemory of camera ids (the plan's set of the cameras
// of one hash bucket, the sweep's set of failed cameras), one task group,
// one page of a scan or of tasks, and one sweep chunk of keys
// (Options.SweepChunk). Planning takes one index scan per bucket, one
// bucket while the expired cameras fit in CameraMemory (8 MiB by default,
// about 100,000 cameras). Waiting for the tasks tallies them in order, so
// it reads each task about once.
//
// A job cancelled (Engine.Cancel, from any process) stops at a task
// boundary: tasks that have begun deleting finish, the others are closed
// and never run, planning stops after the task it is recording and the
// sweep before its next chunk, so its counts are what it deleted.
//
// Deletes can be paced, primary and index rows alike, so that a purge
// leaves live requests their latency: Options.RowsPerSecond caps each
// process, all its jobs together; StartRequest.RowsPerSecond caps one job
// in each process (replica) working on it, not across them, so N replicas
// sharing its tasks delete up to N times its cap. Each row waits on both
// caps, so the lower one binds. The built-in schedule can be paused for
// every process (SetSchedulePaused); ended jobs are retired after
// Options.JobRetention.
//
// # Purges with policies
//
// Retention policies and legal holds (Policies) are rows of two tables of
// the same backend, RetentionPolicies and LegalHolds, so every process
// applies the same ones. A policy sets days per kind for every camera
// (the default), for the cameras whose id starts with a prefix, or for one
// camera; a camera gets, per kind, the days of its own policy, else of the
// longest matching prefix, else of the default, the first that sets the
// kind, and no purge with policies deletes its images without one. A purge
// with policies (StartRequest.UsePolicies) differs from one with a cutoff
// in four places:
//
//   - Start reads every policy once, streaming, for the fewest days any
//     policy sets for each kind: the kind's shortest retention, whose
//     cutoff is the newest (the latest) of the cameras' cutoffs. Its plan
//     and sweep scan the index up to that cutoff's minute, not beyond: no
//     camera has expired rows after it. A kind no policy sets is left out
//     of the job.
//   - The plan resolves each camera once, at the first (so oldest) index
//     row the scan meets of it: a read of its own policy, a lookup of its
//     id's prefixes among the prefix policies (at most MaxPrefixPolicies,
//     a cap their count row keeps whatever creates race; policy_count.go),
//     which the plan holds in memory with the default, and, only if the
//     policy so found expires that oldest row, a read of its hold. A
//     camera without retention for the kind, or whose oldest row is younger
//     than its own cutoff, costs the policy read alone; a held one that and
//     the hold read; neither gets a task or any primary-table work. The
//     others are planned with their own boundary, recorded in the task
//     and, before it, in a row of the job's task partition per camera.
//     Days count from the job's creation, so a resumed plan gives the same
//     boundaries. A camera's own policy is read as the plan reaches the
//     camera: one changed or removed during a purge applies to this purge
//     if the plan has not reached the camera yet, else from the next. The
//     default and the prefix policies are read as the plan's scan starts
//     (each bucket's, when it takes several), so a change to them during
//     the scan applies from the next purge.
//   - A task reads each camera's hold again just before deleting its rows,
//     the latest moment a hold can still spare them: a camera held after
//     it was planned is counted held (Counts.DevicesHeld) and keeps its
//     rows. A hold placed while the camera's delete runs comes too late
//     for that delete; holds are not transactions with it.
//   - The sweep deletes an index row only if its camera was planned (its
//     boundary row exists), the row's partition lies before the camera's
//     boundary, and the camera was neither held at its task nor failed:
//     exactly the index rows whose primary rows the work deleted, whatever
//     the policies became since. A held or spared camera's row in a minute
//     partition otherwise expired makes that partition "not whole", so the
//     fenced range deletion never drops it: the partition's qualifying rows
//     go one by one, the held camera's index rows stay with its primary
//     rows. The sweep holds the boundaries in a cache of at most
//     Options.CameraMemory, forgotten whole when full (a miss is one read).
//
// So no primary row is ever left without its index row: an index row goes
// only where its camera's primary rows were deleted by range, as without
// policies. A dry run with policies resolves the cameras the same way and
// counts what a real run would delete.
//
// The cost of a purge with policies follows the rows its shortest
// retention expires: the index keys read up to that retention's cutoff
// (those of cameras kept by a longer retention included, keys only), one
// policy read per camera met there and one hold read per camera its policy
// would purge, and the primary-table work of the expired cameras alone.
//
// Jobs, tasks and the queue are tables of the same backend, so GetPurge
// answers the same from any process sharing it. The engine running a job
// holds a lease on it, taken over by another once it runs out; each
// taking bumps the job's lease epoch, and the owner's every write of the
// job or its tasks holds only at its own epoch (owner.go), so an engine
// that stalled past its lease and wakes writes nothing more.
package retention
