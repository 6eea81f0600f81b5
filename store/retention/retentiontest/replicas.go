package retentiontest

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention"
)

// deleteLog records which rows each replica deleted from one table.
type deleteLog struct {
	mu      sync.Mutex
	table   string
	deleted map[string][]string // replica -> partition keys (range deletes) or keys (batches)
}

func (d *deleteLog) hook(replica string, gate func()) func(table, op string, keys []store.Key) error {
	return func(table, op string, keys []store.Key) error {
		if table != d.table || (op != "delete-ranges" && op != "batch-delete") {
			return nil
		}
		gate()
		d.mu.Lock()
		defer d.mu.Unlock()
		for _, k := range keys {
			d.deleted[replica] = append(d.deleted[replica], k.PartitionKey+"/"+k.RowKey)
		}
		return nil
	}
}

func (d *deleteLog) count(replica string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.deleted[replica])
}

// testTwoReplicasShareAPurge runs two engines on one store: both work on
// the purge one of them started, both read the same job, and every
// camera's rows are deleted once.
func testTwoReplicasShareAPurge(t *testing.T, ts *suite) {
	ts.each(t, func(t *testing.T, newFixture func(*testing.T, Options) *Fixture) {
		const cameras = 12
		a := ts.open(t, quickOptions())
		a.Seed(t, cameras)
		primary, _ := a.Repo(images.Single).Tables()
		log := &deleteLog{table: primary.Name(), deleted: map[string][]string{}}

		// Each replica's first delete waits until the other replica has
		// reached one too, so the test passes only if both took a share.
		// There are more tasks (12 cameras in groups of 2) than one
		// replica has workers, so neither can hold them all while it waits;
		// a long visibility timeout keeps a waiting task from being handed
		// to the other replica meanwhile.
		entered := map[string]chan struct{}{"a": make(chan struct{}), "b": make(chan struct{})}
		var once = map[string]*sync.Once{"a": {}, "b": {}}
		gate := func(me, other string) func() {
			return func() {
				once[me].Do(func() { close(entered[me]) })
				select {
				case <-entered[other]:
				case <-time.After(patience):
					t.Errorf("replica %s never took a task", other)
				}
			}
		}
		optsA, optsB := quickOptions(), quickOptions()
		optsA.ReplicaID, optsB.ReplicaID = "replica-a", "replica-b"
		optsA.VisibilityTimeout, optsB.VisibilityTimeout = time.Minute, time.Minute
		optsA.Workers, optsB.Workers = 2, 2
		a.Opts = optsA
		a.OpenEngine(t, &HookedBackend{Backend: a.Base, Before: log.hook("a", gate("a", "b"))})
		b := &Fixture{Base: a.Base, Queue: a.Queue, Opts: optsB, AzureEngine: a.AzureEngine, Clock: a.Clock, Harness: a.Harness}
		b.OpenEngine(t, &HookedBackend{Backend: a.Base, Before: log.hook("b", gate("b", "a"))})
		a.Run(t)
		b.Run(t)

		started, err := a.Engine.Start(t.Context(), retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: cutoff})
		if err != nil {
			t.Fatal(err)
		}
		j := a.Await(t, started.ID)
		if j.State != retention.Succeeded {
			t.Fatalf("job %s (%s)", j.State, j.Error)
		}
		wantCounts(t, "shared job", j.Totals(), retention.Counts{DevicesTotal: cameras, DevicesDone: cameras,
			MetadataRows: cameras * expiredPerCamera, IndexRows: cameras * expiredPerCamera})
		seenByB, err := b.Engine.Get(t.Context(), started.ID)
		if err != nil || seenByB.State != j.State || seenByB.Totals() != j.Totals() {
			t.Fatalf("replica b reads %+v, %v; want what a reads", seenByB, err)
		}
		if log.count("a") == 0 || log.count("b") == 0 {
			t.Fatalf("deletes by replica: a %d, b %d; want both to take a share", log.count("a"), log.count("b"))
		}
		all := append(slices.Clone(log.deleted["a"]), log.deleted["b"]...)
		slices.Sort(all)
		if dup := slices.Compact(slices.Clone(all)); len(dup) != len(all) {
			t.Fatalf("%d deletes of %d distinct targets: a row or camera was deleted twice", len(all), len(dup))
		}
		if got := a.Census(t, images.Single, j.Boundary()); got != (Census{PrimaryNew: cameras * keptPerCamera, IndexNew: cameras * keptPerCamera}) {
			t.Fatalf("after the shared purge %+v", got)
		}
	})
}

// testReplicaTakesOverAStalledJob: the replica running a job stops mid-way
// (as a crashed pod does); once its lease runs out another replica takes
// the job over and finishes it with exact counts.
func testReplicaTakesOverAStalledJob(t *testing.T, ts *suite) {
	ts.eachInBubble(t, func(t *testing.T, newFixture func(*testing.T, Options) *Fixture) {
		const cameras = 6
		a := newFixture(t, quickOptions())
		a.Seed(t, cameras)
		primary, _ := a.Repo(images.Single).Tables()
		optsA, optsB := quickOptions(), quickOptions()
		optsA.ReplicaID, optsB.ReplicaID = "replica-a", "replica-b"
		optsA.Workers = 1
		a.Opts = optsA
		stall := make(chan struct{})
		var stalled sync.Once
		a.OpenEngine(t, &HookedBackend{Backend: a.Base, Before: func(table, op string, _ []store.Key) error {
			if table == primary.Name() && (op == "delete-ranges" || op == "batch-delete") {
				stalled.Do(func() { close(stall) })
				return errDead
			}
			return nil
		}})
		a.Run(t)
		started, err := a.Engine.Start(t.Context(), retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: cutoff})
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-stall:
		case <-time.After(patience):
			t.Fatal("replica a never reached its deletes")
		}
		a.Stop()

		b := &Fixture{Base: a.Base, Queue: a.Queue, Opts: optsB, AzureEngine: a.AzureEngine, Clock: a.Clock, Harness: a.Harness}
		b.OpenEngine(t, a.Base)
		b.Run(t)
		j := b.Await(t, started.ID)
		if j.State != retention.Succeeded || j.Owner != "replica-b" {
			t.Fatalf("job %s (%s) owned by %s; want b to finish it", j.State, j.Error, j.Owner)
		}
		wantCounts(t, "taken-over job", j.Totals(), retention.Counts{DevicesTotal: cameras, DevicesDone: cameras,
			MetadataRows: cameras * expiredPerCamera, IndexRows: cameras * expiredPerCamera})
	})
}
