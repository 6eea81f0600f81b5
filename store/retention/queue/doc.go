// Package queue is the retention engine's driver for a backend with
// neither range deletions nor atomic batches across partitions (Azure
// Table Storage): the seeds' design, in which a purge's cost follows the
// expired volume and every step resumes from tables. New is its
// retention.NewDriver.
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
// With retention.Options.Outbox the deletes of step 2 write their outbox rows pending
// before each batch and ready after it, and a job's end settles and seals
// its outbox (outboxseal.go), so the blob side hears of each deletion once.
//
// A job's lease passes to another replica when its owner stops renewing it;
// the owner's every write of the job and its tasks holds only at its lease
// epoch (owner.go), so an owner that stalled and woke writes nothing more.
//
// Its tuning is its own (Options: the queue, workers, group size,
// visibility timeout, attempts, camera memory), given to New; the engine's
// Options know nothing of it.
//
// Its tests run the conformance suite (store/retention/retentiontest) on
// Azurite and also on the embedded store with its transactions and purges
// hidden ("pebble-queue"), in tests only: a scenario on Pebble in memory
// takes milliseconds where Azurite takes seconds, crashes at any write by a
// copy of its files, and waits in a synctest bubble.
//
// Files: options.go, driver.go (the driver, a kind's phases, the wait for its tasks),
// plan.go (plan and dry run), task.go (task records), work.go (workers and
// a task's run), indexdelete.go (deletes by derived index key, thinning),
// deletes.go, janitor.go, owner.go (lease epochs on the tasks),
// boundaries.go (each camera's boundary, for the janitor), cancel.go
// (settling a cancelled job's tasks), outboxseal.go (the outbox of
// deleted images, sealed per job), imagedelete.go (one image deleted on
// purpose).
package queue
