package retentiontest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention"
	"github.com/metadatad/metadatad/store/retention/policy"
	"github.com/metadatad/metadatad/store/retention/queue"
)

// faultBackend wraps every table of a backend to fail chosen reads and
// writes, by table, operation and key, keeping the fast paths of the
// tables it wraps.
type faultBackend struct {
	store.Backend
	// fail runs ahead of every operation; an error fails it. props are
	// what a write writes, nil for reads.
	fail func(table, op string, k store.Key, props store.Properties) error
}

func (b *faultBackend) Table(ctx context.Context, name string) (store.Table, error) {
	t, err := b.Backend.Table(ctx, name)
	if err != nil {
		return nil, err
	}
	return &faultTable{Table: t, fail: b.fail}, nil
}

type faultTable struct {
	store.Table
	fail func(table, op string, k store.Key, props store.Properties) error
}

func (t *faultTable) Get(ctx context.Context, pk, rk string) (store.Entity, error) {
	if err := t.fail(t.Name(), "get", store.Key{PartitionKey: pk, RowKey: rk}, nil); err != nil {
		return store.Entity{}, err
	}
	return t.Table.Get(ctx, pk, rk)
}

func (t *faultTable) Query(ctx context.Context, q store.Query) (store.Page, error) {
	if err := t.fail(t.Name(), "query", store.Key{PartitionKey: q.PartitionKey}, nil); err != nil {
		return store.Page{}, err
	}
	return t.Table.Query(ctx, q)
}

func (t *faultTable) Update(ctx context.Context, e store.Entity, mode store.WriteMode, ifMatch string) (store.Entity, error) {
	if err := t.fail(t.Name(), "update", key(e), e.Properties); err != nil {
		return store.Entity{}, err
	}
	return t.Table.Update(ctx, e, mode, ifMatch)
}

// testCameraFailingEveryAttemptEndsItsJob: a camera whose count, hold read
// or task record fails at every delivery of its task (a damaged sstable,
// an Azure partition that keeps failing) is given up after MaxAttempts
// deliveries: its job ends failed instead of redelivering the task
// forever, the kind's lock is free for the next purge, and the next purge
// deletes the camera's rows once the store heals. A camera that could not
// be counted keeps all its rows, index rows included, and is counted
// failed; the others of its task are purged. The holds are read once per
// task: when they cannot be, every camera of the task is kept and
// counted failed.
func testCameraFailingEveryAttemptEndsItsJob(t *testing.T, ts *suite) {
	t.Parallel() // independent: stores and engines of its own
	const victim = "cam-003"
	injected := errors.New("injected: the partition keeps failing")
	cases := []struct {
		name        string
		usePolicies bool
		// fails says whether an operation is one of the victim's that fail.
		fails func(primary, table, op string, k store.Key, props store.Properties) bool
		// countsFailed: the job counts the victim failed, the rest done;
		// else it just ends failed.
		countsFailed bool
		// wholeTask: one task holds every camera, all counted failed.
		wholeTask bool
	}{
		{
			name: "count",
			fails: func(primary, table, op string, k store.Key, _ store.Properties) bool {
				return table == primary && (op == "count" || op == "query") && k.PartitionKey == victim
			},
			countsFailed: true,
		},
		{
			name:        "hold read",
			usePolicies: true,
			fails: func(_, table, op string, _ store.Key, _ store.Properties) bool {
				return table == retention.DefaultHoldsTable && op == "query"
			},
			countsFailed: true,
			wholeTask:    true,
		},
		{
			name: "task write",
			fails: func(_, table, op string, _ store.Key, props store.Properties) bool {
				doc, _ := props["Doc"].(string)
				return table == queue.DefaultTasksTable && op == "update" && strings.Contains(doc, `"`+victim+`"`)
			},
		},
	}
	ts.each(t, func(t *testing.T, open func(*testing.T, Options) *Fixture) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				opts := quickOptions()
				if c.wholeTask {
					opts.GroupSize = cameras
				}
				f := open(t, opts)
				f.Seed(t, cameras)
				if c.usePolicies {
					if _, err := f.Engine.Policies().CreatePolicy(t.Context(), policy.Policy{Scope: policy.ScopeDefault,
						Days: map[images.Kind]int{images.Single: 1}}); err != nil {
						t.Fatal(err)
					}
				}
				primary, _ := f.Repo(images.Single).Tables()
				var broken atomic.Bool
				broken.Store(true)
				var mu sync.Mutex
				seen := 0
				f.OpenEngine(t, &faultBackend{Backend: f.Base, fail: func(table, op string, k store.Key, props store.Properties) error {
					if !broken.Load() || !c.fails(primary.Name(), table, op, k, props) {
						return nil
					}
					mu.Lock()
					defer mu.Unlock()
					seen++
					if c.usePolicies && seen == 1 {
						return nil // the plan's read of the hold; the task's fail
					}
					return injected
				}})
				attempts := func() int {
					mu.Lock()
					defer mu.Unlock()
					return seen
				}
				f.Run(t)
				req := retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: cutoff, UsePolicies: c.usePolicies}
				started, err := f.Engine.Start(t.Context(), req)
				if err != nil {
					t.Fatal(err)
				}
				j := awaitGivingUp(t, f, started.ID, attempts, opts.MaxAttempts)
				if j.State != retention.Failed || j.Error == "" {
					t.Fatalf("job %s (%q), want failed with a reason", j.State, j.Error)
				}
				if n := attempts(); n == 0 {
					t.Fatal("the fault was never met")
				}
				if c.countsFailed {
					got := j.Totals()
					failed := int64(1)
					if c.wholeTask {
						failed = cameras
					}
					if got.DevicesFailed != failed || got.DevicesDone != cameras-failed || got.DevicesTotal != cameras {
						t.Fatalf("counts %+v, want %d failed", got, failed)
					}
					victimRows := int64(expiredPerCamera)
					if c.usePolicies {
						victimRows += keptPerCamera // a day's retention expires every fixture image
					}
					victimRows *= failed
					left := f.Census(t, images.Single, j.Boundary())
					if left.PrimaryOld != victimRows || left.IndexOld != victimRows {
						t.Fatalf("after the failed purge %+v, want the victim's expired rows kept, index included", left)
					}
				}

				// The lock is free: the next purge starts while the
				// fault lasts, and fails alike, ...
				next, err := f.Engine.Start(t.Context(), req)
				if err != nil {
					t.Fatalf("a purge after the failed job ended: %v", err)
				}
				if j := awaitGivingUp(t, f, next.ID, attempts, 2*opts.MaxAttempts); !j.State.Terminal() {
					t.Fatalf("second job %s", j.State)
				}
				// ... and, once the store heals, one purges the rest.
				broken.Store(false)
				healed := f.Purge(t, req)
				if healed.State != retention.Succeeded {
					t.Fatalf("after healing: %s (%s)", healed.State, healed.Error)
				}
				if got := f.Census(t, images.Single, j.Boundary()); got.PrimaryOld != 0 || got.IndexOld != 0 {
					t.Fatalf("after healing %+v, want no expired row left", got)
				}
			})
		}
	})
}

// awaitGivingUp waits for the job to end, and fails the test at once if
// the faulty operation is met more often than bound allows: the job is
// then retrying for ever instead of giving up.
func awaitGivingUp(t *testing.T, f *Fixture, id string, attempts func() int, bound int) *retention.Job {
	t.Helper()
	return f.AwaitChecking(t, id, func(j *retention.Job) {
		if n := attempts(); n > bound+1 {
			t.Fatalf("job %s still %s after the faulty operation failed %d times; want it given up after %d deliveries", id, j.State, n, bound)
		}
	})
}
