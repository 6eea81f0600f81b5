package retention_test

import (
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention"
	"github.com/metadatad/metadatad/store/retention/drivers"
)

// blockOnce holds the first write that matches until released, and says
// when one has arrived.
type blockOnce struct {
	mu      sync.Mutex
	match   func(table, op string) bool
	once    sync.Once
	reached chan struct{}
	release chan struct{}
}

func newBlockOnce(match func(table, op string) bool) *blockOnce {
	return &blockOnce{match: match, reached: make(chan struct{}), release: make(chan struct{})}
}

func (b *blockOnce) before(table, op string, _ []store.Key) error {
	b.mu.Lock()
	matched := b.match(table, op)
	b.mu.Unlock()
	if !matched {
		return nil
	}
	b.once.Do(func() {
		close(b.reached)
		<-b.release
	})
	return nil
}

// cancelPhases are the phases the cancel tests stop a purge in of one
// kind, each at a write the first that matches is held at while the
// cancel is requested.
var cancelPhases = []struct {
	name string
	// at picks the write the job is cancelled at, given the kind's tables.
	at func(primary, index string) func(table, op string) bool
}{
	{"planning", func(string, string) func(string, string) bool {
		inserts := 0
		return func(table, op string) bool {
			if table == retention.DefaultTasksTable && op == "batch-insert" {
				inserts++
				return inserts == 2 // the second task of three
			}
			return false
		}
	}},
	{"working", func(primary, _ string) func(string, string) bool {
		return func(table, op string) bool { return table == primary && deletesRows(op) }
	}},
	// A task's index deletes, after its primary rows' first batch.
	{"deleting index rows", func(_, index string) func(string, string) bool {
		return func(table, op string) bool { return table == index && deletesRows(op) }
	}},
}

// deletesRows says whether a write deletes rows.
func deletesRows(op string) bool {
	return op == "delete-ranges" || op == "delete-keys" || op == "batch-delete"
}

// TestCancelStopsAtATaskBoundary cancels a purge in each of its phases,
// from an engine of another replica that does not run it: the job ends
// Cancelled, its counts are exactly the rows it deleted, the phase stopped
// short of the end, and the next purge deletes the rest, its counts and
// the cancelled job's adding up to every expired row.
func TestCancelStopsAtATaskBoundary(t *testing.T) {
	t.Parallel() // independent: stores and engines of its own
	kind := images.Single
	forEachQueueStore(t, func(t *testing.T, newFixture func(*testing.T, retention.Options) *fixture) {
		for _, phase := range cancelPhases {
			t.Run(phase.name, func(t *testing.T) {
				opts := quickOptions()
				opts.Workers = 1 // one task at a time: the others are still to begin
				f := newFixture(t, opts)
				f.seed(t, cameras)
				primaryTable, indexTable := f.repo(kind).Tables()
				block := newBlockOnce(phase.at(primaryTable.Name(), indexTable.Name()))
				f.openEngine(t, &hookedBackend{Backend: f.base, before: block.before})
				before := f.census(t, kind, base.Add(2*time.Minute))
				f.run(t)
				started, err := f.engine.Start(t.Context(), retention.StartRequest{Kinds: []images.Kind{kind}, Cutoff: cutoff})
				if err != nil {
					t.Fatal(err)
				}
				<-block.reached
				other := f.otherReplica(t)
				got, err := other.Cancel(t.Context(), started.ID)
				if err != nil {
					t.Fatal(err)
				}
				if !got.CancelRequested || got.State.Terminal() {
					t.Errorf("Cancel returned state %s, cancel requested %t", got.State, got.CancelRequested)
				}
				close(block.release)
				j := f.await(t, started.ID)
				if j.State != retention.Cancelled {
					t.Fatalf("state %s (%s), want cancelled", j.State, j.Error)
				}
				after := f.census(t, kind, j.Boundary())
				c := j.Totals()
				if gone := before.primaryOld - after.primaryOld; c.MetadataRows != gone {
					t.Errorf("cancelled job counts %d primary rows, %d are gone", c.MetadataRows, gone)
				}
				if gone := before.indexOld - after.indexOld; c.IndexRows != gone {
					t.Errorf("cancelled job counts %d index rows, %d are gone", c.IndexRows, gone)
				}
				if stopped := after.primaryOld > 0; !stopped {
					t.Errorf("a purge cancelled while %s went on: %+v left", phase.name, after)
				}
				if after.primaryNew != before.primaryNew || after.indexNew != before.indexNew {
					t.Errorf("rows from the boundary on touched: before %+v, after %+v", before, after)
				}
				if _, err := other.Cancel(t.Context(), started.ID); !errors.Is(err, retention.ErrJobEnded) {
					t.Errorf("cancel of the cancelled job: %v, want ErrJobEnded", err)
				}

				next := f.purge(t, retention.StartRequest{Kinds: []images.Kind{kind}, Cutoff: cutoff})
				if next.State != retention.Succeeded {
					t.Fatalf("next purge: state %s (%s)", next.State, next.Error)
				}
				if got := f.census(t, kind, j.Boundary()); got.primaryOld != 0 || got.indexOld != 0 {
					t.Errorf("after the next purge: %+v", got)
				}
				n := next.Totals()
				if sum := c.MetadataRows + n.MetadataRows; sum != before.primaryOld {
					t.Errorf("primary rows counted %d + %d, %d expired", c.MetadataRows, n.MetadataRows, before.primaryOld)
				}
				if sum := c.IndexRows + n.IndexRows; sum != before.indexOld {
					t.Errorf("index rows counted %d + %d, %d expired", c.IndexRows, n.IndexRows, before.indexOld)
				}
			})
		}
	})
}

// TestCancelPurgeWithPolicies cancels a purge with policies in each of its
// phases: the job ends Cancelled, its counts exactly the rows it deleted,
// the phase stopped short of the end; the next purge with policies
// succeeds, its counts and the cancelled job's adding up to every row the
// policies expire, each camera left exactly what its policy keeps, with
// its index rows, the held camera untouched.
func TestCancelPurgeWithPolicies(t *testing.T) {
	kind := images.Single
	forEachQueueStore(t, func(t *testing.T, newFixture func(*testing.T, retention.Options) *fixture) {
		for _, phase := range cancelPhases {
			t.Run(phase.name, func(t *testing.T) {
				opts, now := policyOptions()
				opts.Workers = 1 // one task at a time: the others are still to begin
				f := newFixture(t, opts)
				single := setPolicies(t, f.engine)
				f.seedDays(t, now, []images.Kind{kind}, cameraNames(single)...)
				primaryTable, indexTable := f.repo(kind).Tables()
				block := newBlockOnce(phase.at(primaryTable.Name(), indexTable.Name()))
				f.openEngine(t, &hookedBackend{Backend: f.base, before: block.before})
				primaryBefore, indexBefore := int64(len(rows(t, primaryTable))), int64(len(rows(t, indexTable)))
				f.run(t)
				started, err := f.engine.Start(t.Context(), retention.StartRequest{Kinds: []images.Kind{kind}, UsePolicies: true})
				if err != nil {
					t.Fatal(err)
				}
				<-block.reached
				if _, err := f.otherReplica(t).Cancel(t.Context(), started.ID); err != nil {
					t.Fatal(err)
				}
				close(block.release)
				j := f.await(t, started.ID)
				if j.State != retention.Cancelled {
					t.Fatalf("state %s (%s), want cancelled", j.State, j.Error)
				}
				c := j.Totals()
				if gone := primaryBefore - int64(len(rows(t, primaryTable))); c.MetadataRows != gone {
					t.Errorf("cancelled job counts %d primary rows, %d are gone", c.MetadataRows, gone)
				}
				if gone := indexBefore - int64(len(rows(t, indexTable))); c.IndexRows != gone {
					t.Errorf("cancelled job counts %d index rows, %d are gone", c.IndexRows, gone)
				}
				want := expired(single)
				if stopped := c.MetadataRows < want; !stopped {
					t.Errorf("a purge cancelled while %s went on: counts %+v of %d expired rows", phase.name, c, want)
				}

				next := f.purge(t, retention.StartRequest{Kinds: []images.Kind{kind}, UsePolicies: true})
				if next.State != retention.Succeeded {
					t.Fatalf("next purge: state %s (%s)", next.State, next.Error)
				}
				n := next.Totals()
				if sum := c.MetadataRows + n.MetadataRows; sum != want {
					t.Errorf("primary rows counted %d + %d, %d expired", c.MetadataRows, n.MetadataRows, want)
				}
				if sum := c.IndexRows + n.IndexRows; sum != want {
					t.Errorf("index rows counted %d + %d, %d expired", c.IndexRows, n.IndexRows, want)
				}
				f.checkKept(t, now, kind, single)
			})
		}
	})
}

// TestCancelFinishesARedeliveredTask: a task whose first delivery deleted
// one camera and failed at the other's delete is delivered again after its
// job's cancel. The first delivery may have deleted rows it did not record,
// so that delivery runs the task to its end: the job ends Cancelled
// counting exactly the task's two cameras, and the task not begun is
// closed, its cameras left for the next purge.
func TestCancelFinishesARedeliveredTask(t *testing.T) {
	kind := images.Single
	forEachQueueStore(t, func(t *testing.T, newFixture func(*testing.T, retention.Options) *fixture) {
		opts := quickOptions()
		opts.Workers = 1
		f := newFixture(t, opts)
		f.seed(t, 4)
		primaryTable, _ := f.repo(kind).Tables()
		var once sync.Once
		reached, release := make(chan struct{}), make(chan struct{})
		f.openEngine(t, &hookedBackend{Backend: f.base, before: func(table, op string, _ []store.Key) error {
			fail := false
			if table == primaryTable.Name() && deletesRows(op) {
				once.Do(func() {
					close(reached)
					<-release
					fail = true
				})
			}
			if fail {
				return errors.New("test: the task's first delete fails")
			}
			return nil
		}})
		before := f.census(t, kind, base.Add(2*time.Minute))
		f.run(t)
		started, err := f.engine.Start(t.Context(), retention.StartRequest{Kinds: []images.Kind{kind}, Cutoff: cutoff})
		if err != nil {
			t.Fatal(err)
		}
		<-reached
		if _, err := f.otherReplica(t).Cancel(t.Context(), started.ID); err != nil {
			t.Fatal(err)
		}
		close(release)
		j := f.await(t, started.ID)
		c := requireCancelledCounting(t, f, kind, before, j, 2*expiredPerCamera)
		if c.MetadataRowsLowerBound || c.DevicesDone != 2 {
			t.Errorf("counts %+v, want two cameras done, exact", c)
		}

		next := f.purge(t, retention.StartRequest{Kinds: []images.Kind{kind}, Cutoff: cutoff})
		if next.State != retention.Succeeded {
			t.Fatalf("next purge: state %s (%s)", next.State, next.Error)
		}
		if sum := c.MetadataRows + next.Totals().MetadataRows; sum != before.primaryOld {
			t.Errorf("primary rows counted %d + %d, %d expired", c.MetadataRows, next.Totals().MetadataRows, before.primaryOld)
		}
	})
}

// TestCancelCountsATaskThatEndsWhileSettling: the settling of a cancel
// reads a task not yet begun, and the task's delivery, which read the job
// before the cancel, runs it to its end before the settling visits it.
// The settling must read the task again rather than trust what it read:
// the job ends Cancelled counting exactly the task's rows.
func TestCancelCountsATaskThatEndsWhileSettling(t *testing.T) {
	kind := images.Single
	forEachQueueStore(t, func(t *testing.T, newFixture func(*testing.T, retention.Options) *fixture) {
		opts := quickOptions()
		opts.Workers = 1
		f := newFixture(t, opts)
		f.seed(t, 4) // two tasks
		// The first task's delivery is held at its count's record, the
		// write that begins it.
		var mu sync.Mutex
		var held store.Key
		block := newBlockOnce(func(table, op string) bool { return table == retention.DefaultTasksTable && op == "update" })
		f.openEngine(t, &hookedBackend{Backend: f.base, before: func(table, op string, keys []store.Key) error {
			mu.Lock()
			if held == (store.Key{}) && table == retention.DefaultTasksTable && op == "update" {
				held = keys[0]
			}
			mu.Unlock()
			return block.before(table, op, keys)
		}})
		var settled sync.Once
		f.hooks.Settle = func(job string, _ images.Kind) {
			settled.Do(func() {
				close(block.release)
				mu.Lock()
				task := held.RowKey
				mu.Unlock()
				deadline := time.Now().Add(patience)
				for {
					done, err := f.hooks.TaskDone(t.Context(), job, task)
					if err != nil {
						t.Error(err)
						return
					}
					if done || time.Now().After(deadline) {
						return
					}
					time.Sleep(time.Millisecond)
				}
			})
		}
		before := f.census(t, kind, base.Add(2*time.Minute))
		f.run(t)
		started, err := f.engine.Start(t.Context(), retention.StartRequest{Kinds: []images.Kind{kind}, Cutoff: cutoff})
		if err != nil {
			t.Fatal(err)
		}
		<-block.reached
		if _, err := f.otherReplica(t).Cancel(t.Context(), started.ID); err != nil {
			t.Fatal(err)
		}
		requireCancelledCounting(t, f, kind, before, f.await(t, started.ID), 2*expiredPerCamera) // the first task's
	})
}

// requireCancelledCounting fails unless j ended Cancelled counting exactly
// the rows of kind gone since before, want primary rows and as many index
// rows, and returns its counts.
func requireCancelledCounting(t *testing.T, f *fixture, kind images.Kind, before census, j *retention.Job, want int64) retention.Counts {
	t.Helper()
	if j.State != retention.Cancelled {
		t.Fatalf("state %s (%s), want cancelled", j.State, j.Error)
	}
	after := f.census(t, kind, j.Boundary())
	c := j.Totals()
	if gone := before.primaryOld - after.primaryOld; c.MetadataRows != gone || gone != want {
		t.Errorf("cancelled job counts %d primary rows, %d are gone, want %d", c.MetadataRows, gone, want)
	}
	if gone := before.indexOld - after.indexOld; c.IndexRows != gone || gone != want {
		t.Errorf("cancelled job counts %d index rows, %d are gone, want %d", c.IndexRows, gone, want)
	}
	return c
}

// TestCancelRefusals: an unknown job is not found, a finished one has ended.
func TestCancelRefusals(t *testing.T) {
	f := newFixture(t, quickOptions())
	f.seed(t, 1)
	f.run(t)
	if _, err := f.engine.Cancel(t.Context(), "00000000000000000000"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown job: %v, want ErrNotFound", err)
	}
	j := f.purge(t, retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: cutoff})
	if _, err := f.engine.Cancel(t.Context(), j.ID); !errors.Is(err, retention.ErrJobEnded) {
		t.Errorf("finished job: %v, want ErrJobEnded", err)
	}
	if got, _ := f.engine.Get(t.Context(), j.ID); got.State != retention.Succeeded || got.CancelRequested {
		t.Errorf("refused cancel changed the job: %s, cancel requested %t", got.State, got.CancelRequested)
	}
}

// otherReplica opens a second engine on the fixture's store, as another
// replica would, without running it.
func (f *fixture) otherReplica(t *testing.T) *retention.Engine {
	t.Helper()
	opts := f.opts
	opts.Backend, opts.Repositories, opts.Queue, opts.ReplicaID = f.backend, f.repos, f.queue, "other"
	opts.Driver = drivers.For(f.backend)
	e, err := retention.Open(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestCancelStopsAPacedPurgeAtOnce cancels, from another replica, a purge
// paced to 5 rows a second, as slow as an operator can ask, of 20 cameras:
// without the cancel it would pace for most of a minute. It ends Cancelled
// within a second, having deleted nothing (the pacer's wait is where the
// cancel finds it), is counted among this engine's cancelled jobs, and the
// next purge deletes everything. The time is the bubble's, so the test
// waits for nothing.
func TestCancelStopsAPacedPurgeAtOnce(t *testing.T) {
	kind := images.Single
	for _, s := range []struct {
		name        string
		azureEngine bool
	}{{"pebble", false}, {"pebble-queue", true}} {
		t.Run(s.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				opts := quickOptions()
				opts.PollInterval, opts.VisibilityTimeout = 0, time.Minute // their defaults' scale
				f := newBubbleFixture(t, opts, s.azureEngine)
				f.seed(t, 20)
				asked := make(chan struct{})
				var once sync.Once
				retention.CountPacedRows(f.engine, func(float64, int) { once.Do(func() { close(asked) }) })
				before := f.census(t, kind, base.Add(2*time.Minute))
				f.run(t)
				started, err := f.engine.Start(t.Context(), retention.StartRequest{Kinds: []images.Kind{kind}, Cutoff: cutoff, RowsPerSecond: 5})
				if err != nil {
					t.Fatal(err)
				}
				<-asked
				if _, err := f.otherReplica(t).Cancel(t.Context(), started.ID); err != nil {
					t.Fatal(err)
				}
				cancelled := time.Now()
				j := f.await(t, started.ID)
				if took := time.Since(cancelled); took > time.Second {
					t.Errorf("the cancelled purge ran on for %s", took)
				}
				if j.State != retention.Cancelled {
					t.Fatalf("state %s (%s), want cancelled", j.State, j.Error)
				}
				if got := f.census(t, kind, j.Boundary()); got != before {
					t.Errorf("rows before the cancel %+v, after it %+v: a cancelled purge deleted", before, got)
				}
				if c := j.Totals(); c.MetadataRows != 0 || c.IndexRows != 0 || c.MetadataRowsLowerBound {
					t.Errorf("cancelled job counts %+v, want no rows", c)
				}
				stats := f.statsOnceEnded(t, func(ended map[retention.State]int64) bool { return len(ended) > 0 })
				if n := stats.Ended[retention.Cancelled]; n != 1 || len(stats.Ended) != 1 {
					t.Errorf("engine counts %v ended jobs, want 1 cancelled", stats.Ended)
				}

				next := f.purge(t, retention.StartRequest{Kinds: []images.Kind{kind}, Cutoff: cutoff})
				if next.State != retention.Succeeded {
					t.Fatalf("next purge: state %s (%s)", next.State, next.Error)
				}
				if n := next.Totals(); n.MetadataRows != before.primaryOld || n.IndexRows != before.indexOld {
					t.Errorf("next purge counts %+v, %d primary and %d index rows expired", n, before.primaryOld, before.indexOld)
				}
				f.stop()
			})
		})
	}
}
