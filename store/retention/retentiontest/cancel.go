package retentiontest

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention"
	"github.com/metadatad/metadatad/store/retention/drivers"
	"github.com/metadatad/metadatad/store/retention/queue"
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

func (b *blockOnce) Before(table, op string, _ []store.Key) error {
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
			if table == queue.DefaultTasksTable && op == "batch-insert" {
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

// testCancelStopsAtATaskBoundary cancels a purge in each of its phases,
// from an engine of another replica that does not run it: the job ends
// Cancelled, its counts are exactly the rows it deleted, the phase stopped
// short of the end, and the next purge deletes the rest, its counts and
// the cancelled job's adding up to every expired row.
func testCancelStopsAtATaskBoundary(t *testing.T, ts *suite) {
	t.Parallel() // independent: stores and engines of its own
	kind := images.Single
	ts.each(t, func(t *testing.T, newFixture func(*testing.T, Options) *Fixture) {
		for _, phase := range cancelPhases {
			t.Run(phase.name, func(t *testing.T) {
				opts := quickOptions()
				opts.Workers = 1 // one task at a time: the others are still to begin
				f := ts.open(t, opts)
				f.Seed(t, cameras)
				primaryTable, indexTable := f.Repo(kind).Tables()
				block := newBlockOnce(phase.at(primaryTable.Name(), indexTable.Name()))
				f.OpenEngine(t, &HookedBackend{Backend: f.Base, Before: block.Before})
				before := f.Census(t, kind, base.Add(2*time.Minute))
				f.Run(t)
				started, err := f.Engine.Start(t.Context(), retention.StartRequest{Kinds: []images.Kind{kind}, Cutoff: cutoff})
				if err != nil {
					t.Fatal(err)
				}
				<-block.reached
				other := f.OtherReplica(t)
				got, err := other.Cancel(t.Context(), started.ID)
				if err != nil {
					t.Fatal(err)
				}
				if !got.CancelRequested || got.State.Terminal() {
					t.Errorf("Cancel returned state %s, cancel requested %t", got.State, got.CancelRequested)
				}
				close(block.release)
				j := f.Await(t, started.ID)
				if j.State != retention.Cancelled {
					t.Fatalf("state %s (%s), want cancelled", j.State, j.Error)
				}
				after := f.Census(t, kind, j.Boundary())
				c := j.Totals()
				if gone := before.PrimaryOld - after.PrimaryOld; c.MetadataRows != gone {
					t.Errorf("cancelled job counts %d primary rows, %d are gone", c.MetadataRows, gone)
				}
				if gone := before.IndexOld - after.IndexOld; c.IndexRows != gone {
					t.Errorf("cancelled job counts %d index rows, %d are gone", c.IndexRows, gone)
				}
				if stopped := after.PrimaryOld > 0; !stopped {
					t.Errorf("a purge cancelled while %s went on: %+v left", phase.name, after)
				}
				if after.PrimaryNew != before.PrimaryNew || after.IndexNew != before.IndexNew {
					t.Errorf("rows from the boundary on touched: before %+v, after %+v", before, after)
				}
				if _, err := other.Cancel(t.Context(), started.ID); !errors.Is(err, retention.ErrJobEnded) {
					t.Errorf("cancel of the cancelled job: %v, want ErrJobEnded", err)
				}

				next := f.Purge(t, retention.StartRequest{Kinds: []images.Kind{kind}, Cutoff: cutoff})
				if next.State != retention.Succeeded {
					t.Fatalf("next purge: state %s (%s)", next.State, next.Error)
				}
				if got := f.Census(t, kind, j.Boundary()); got.PrimaryOld != 0 || got.IndexOld != 0 {
					t.Errorf("after the next purge: %+v", got)
				}
				n := next.Totals()
				if sum := c.MetadataRows + n.MetadataRows; sum != before.PrimaryOld {
					t.Errorf("primary rows counted %d + %d, %d expired", c.MetadataRows, n.MetadataRows, before.PrimaryOld)
				}
				if sum := c.IndexRows + n.IndexRows; sum != before.IndexOld {
					t.Errorf("index rows counted %d + %d, %d expired", c.IndexRows, n.IndexRows, before.IndexOld)
				}
			})
		}
	})
}

// testCancelPurgeWithPolicies cancels a purge with policies in each of its
// phases: the job ends Cancelled, its counts exactly the rows it deleted,
// the phase stopped short of the end; the next purge with policies
// succeeds, its counts and the cancelled job's adding up to every row the
// policies expire, each camera left exactly what its policy keeps, with
// its index rows, the held camera untouched.
func testCancelPurgeWithPolicies(t *testing.T, ts *suite) {
	kind := images.Single
	ts.each(t, func(t *testing.T, newFixture func(*testing.T, Options) *Fixture) {
		for _, phase := range cancelPhases {
			t.Run(phase.name, func(t *testing.T) {
				opts, now := policyOptions()
				opts.Workers = 1 // one task at a time: the others are still to begin
				f := ts.open(t, opts)
				single := setPolicies(t, f.Engine)
				f.SeedDays(t, now, []images.Kind{kind}, cameraNames(single)...)
				primaryTable, indexTable := f.Repo(kind).Tables()
				block := newBlockOnce(phase.at(primaryTable.Name(), indexTable.Name()))
				f.OpenEngine(t, &HookedBackend{Backend: f.Base, Before: block.Before})
				primaryBefore, indexBefore := int64(len(rows(t, primaryTable))), int64(len(rows(t, indexTable)))
				f.Run(t)
				started, err := f.Engine.Start(t.Context(), retention.StartRequest{Kinds: []images.Kind{kind}, UsePolicies: true})
				if err != nil {
					t.Fatal(err)
				}
				<-block.reached
				if _, err := f.OtherReplica(t).Cancel(t.Context(), started.ID); err != nil {
					t.Fatal(err)
				}
				close(block.release)
				j := f.Await(t, started.ID)
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

				next := f.Purge(t, retention.StartRequest{Kinds: []images.Kind{kind}, UsePolicies: true})
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
				f.CheckKept(t, now, kind, single)
			})
		}
	})
}

// testCancelFinishesARedeliveredTask: a task whose first delivery deleted
// one camera and failed at the other's delete is delivered again after its
// job's cancel. The first delivery may have deleted rows it did not record,
// so that delivery runs the task to its end: the job ends Cancelled
// counting exactly the task's two cameras, and the task not begun is
// closed, its cameras left for the next purge.
func testCancelFinishesARedeliveredTask(t *testing.T, ts *suite) {
	kind := images.Single
	ts.each(t, func(t *testing.T, newFixture func(*testing.T, Options) *Fixture) {
		opts := quickOptions()
		opts.Workers = 1
		f := ts.open(t, opts)
		f.Seed(t, 4)
		primaryTable, _ := f.Repo(kind).Tables()
		var once sync.Once
		reached, release := make(chan struct{}), make(chan struct{})
		f.OpenEngine(t, &HookedBackend{Backend: f.Base, Before: func(table, op string, _ []store.Key) error {
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
		before := f.Census(t, kind, base.Add(2*time.Minute))
		f.Run(t)
		started, err := f.Engine.Start(t.Context(), retention.StartRequest{Kinds: []images.Kind{kind}, Cutoff: cutoff})
		if err != nil {
			t.Fatal(err)
		}
		<-reached
		if _, err := f.OtherReplica(t).Cancel(t.Context(), started.ID); err != nil {
			t.Fatal(err)
		}
		close(release)
		j := f.Await(t, started.ID)
		c := requireCancelledCounting(t, f, kind, before, j, 2*expiredPerCamera)
		if c.MetadataRowsLowerBound || c.DevicesDone != 2 {
			t.Errorf("counts %+v, want two cameras done, exact", c)
		}

		next := f.Purge(t, retention.StartRequest{Kinds: []images.Kind{kind}, Cutoff: cutoff})
		if next.State != retention.Succeeded {
			t.Fatalf("next purge: state %s (%s)", next.State, next.Error)
		}
		if sum := c.MetadataRows + next.Totals().MetadataRows; sum != before.PrimaryOld {
			t.Errorf("primary rows counted %d + %d, %d expired", c.MetadataRows, next.Totals().MetadataRows, before.PrimaryOld)
		}
	})
}

// testCancelCountsATaskThatEndsWhileSettling: the settling of a cancel
// reads a task not yet begun, and the task's delivery, which read the job
// before the cancel, runs it to its end before the settling visits it.
// The settling must read the task again rather than trust what it read:
// the job ends Cancelled counting exactly the task's rows.
func testCancelCountsATaskThatEndsWhileSettling(t *testing.T, ts *suite) {
	kind := images.Single
	ts.each(t, func(t *testing.T, newFixture func(*testing.T, Options) *Fixture) {
		opts := quickOptions()
		opts.Workers = 1
		f := ts.open(t, opts)
		f.Seed(t, 4) // two tasks
		// The first task's delivery is held at its count's record, the
		// write that begins it.
		var mu sync.Mutex
		var held store.Key
		block := newBlockOnce(func(table, op string) bool { return table == queue.DefaultTasksTable && op == "update" })
		f.OpenEngine(t, &HookedBackend{Backend: f.Base, Before: func(table, op string, keys []store.Key) error {
			mu.Lock()
			if held == (store.Key{}) && table == queue.DefaultTasksTable && op == "update" {
				held = keys[0]
			}
			mu.Unlock()
			return block.Before(table, op, keys)
		}})
		var settled sync.Once
		f.Hooks.Settle = func(job string, _ images.Kind) {
			settled.Do(func() {
				close(block.release)
				mu.Lock()
				task := held.RowKey
				mu.Unlock()
				deadline := time.Now().Add(patience)
				for {
					done, err := f.Hooks.TaskDone(t.Context(), job, task)
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
		before := f.Census(t, kind, base.Add(2*time.Minute))
		f.Run(t)
		started, err := f.Engine.Start(t.Context(), retention.StartRequest{Kinds: []images.Kind{kind}, Cutoff: cutoff})
		if err != nil {
			t.Fatal(err)
		}
		<-block.reached
		if _, err := f.OtherReplica(t).Cancel(t.Context(), started.ID); err != nil {
			t.Fatal(err)
		}
		requireCancelledCounting(t, f, kind, before, f.Await(t, started.ID), 2*expiredPerCamera) // the first task's
	})
}

// requireCancelledCounting fails unless j ended Cancelled counting exactly
// the rows of kind gone since before, want primary rows and as many index
// rows, and returns its counts.
func requireCancelledCounting(t *testing.T, f *Fixture, kind images.Kind, before Census, j *retention.Job, want int64) retention.Counts {
	t.Helper()
	if j.State != retention.Cancelled {
		t.Fatalf("state %s (%s), want cancelled", j.State, j.Error)
	}
	after := f.Census(t, kind, j.Boundary())
	c := j.Totals()
	if gone := before.PrimaryOld - after.PrimaryOld; c.MetadataRows != gone || gone != want {
		t.Errorf("cancelled job counts %d primary rows, %d are gone, want %d", c.MetadataRows, gone, want)
	}
	if gone := before.IndexOld - after.IndexOld; c.IndexRows != gone || gone != want {
		t.Errorf("cancelled job counts %d index rows, %d are gone, want %d", c.IndexRows, gone, want)
	}
	return c
}

// testCancelRefusals: an unknown job is not found, a finished one has ended.
func testCancelRefusals(t *testing.T, ts *suite) {
	f := ts.open(t, quickOptions())
	f.Seed(t, 1)
	f.Run(t)
	if _, err := f.Engine.Cancel(t.Context(), "00000000000000000000"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown job: %v, want ErrNotFound", err)
	}
	j := f.Purge(t, retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: cutoff})
	if _, err := f.Engine.Cancel(t.Context(), j.ID); !errors.Is(err, retention.ErrJobEnded) {
		t.Errorf("finished job: %v, want ErrJobEnded", err)
	}
	if got, _ := f.Engine.Get(t.Context(), j.ID); got.State != retention.Succeeded || got.CancelRequested {
		t.Errorf("refused cancel changed the job: %s, cancel requested %t", got.State, got.CancelRequested)
	}
}

// OtherReplica opens a second engine on the fixture's store, as another
// replica would, without running it.
func (f *Fixture) OtherReplica(t *testing.T) *retention.Engine {
	t.Helper()
	opts := f.Opts
	opts.Backend, opts.Repositories, opts.Queue, opts.ReplicaID = f.Backend, f.Repos, f.Queue, "other"
	opts.Driver = drivers.For(f.Backend, opts.QueueOptions)
	e, err := retention.Open(t.Context(), opts.Options)
	if err != nil {
		t.Fatal(err)
	}
	return e
}
