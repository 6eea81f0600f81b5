// Package retentiontest is the conformance suite of the retention engine's
// drivers (retention.Driver): the scenarios every driver must pass on the
// backend it runs on, run by each driver's own test in a few lines with a
// Harness, as go-cloud's docstore/drivertest and store/storetest do.
//
// A Harness names the driver under test (Driver, Queue) and its backend:
// Pebble on an in-memory filesystem, where a crash keeps a copy of what was
// synced for the restarted process (Fixture.Reopen), rows age on a virtual
// clock and time-bound scenarios run in a synctest bubble; or Azurite,
// which keeps every acknowledged write and runs on the wall clock. Run runs
// each scenario that applies as a named subtest: those every driver keeps
// (a purge retires exactly the expired, a crash at any write resumes
// exactly, late writers, holds, policies, thinning, the outbox exactly
// once, cancels, counts, statistics, the schedule), and those of a design
// with a queue of tasks (redeliveries, visibility timeouts, the janitor,
// replicas sharing a job). A scenario is registered only for the modes it
// applies to, so no subtest passes by running nothing.
//
// Fixture, Open and the values in shared.go are exported for the engine's
// own tests in store/retention, which reach inside the engine and so cannot
// be scenarios here but seed and check the same stores.
package retentiontest
