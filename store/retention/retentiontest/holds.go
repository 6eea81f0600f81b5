package retentiontest

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention"
	"github.com/metadatad/metadatad/store/retention/policy"
	"github.com/metadatad/metadatad/store/retention/queue"
)

// testAHoldHoldsAgainstEveryPurge: a legal hold keeps its camera whole
// whatever the purge: by cutoff (retention_days and cutoff_time are both a
// cutoff here), by the built-in schedule, with policies, and in a dry run,
// which counts the same; the held camera is counted held, its images never
// reach the outbox, and once the hold is released the next purge deletes
// its expired images.
func testAHoldHoldsAgainstEveryPurge(t *testing.T, ts *suite) {
	single := []images.Kind{images.Single}
	ts.each(t, func(t *testing.T, open func(*testing.T, Options) *Fixture) {
		cameras := map[string]int{"cam-a": 3, "cam-b": 3, "held-1": 0}
		opts, now := policyOptions()
		opts.Outbox = true
		f := open(t, opts)
		if _, err := f.Engine.Policies().CreateHold(t.Context(), policy.Hold{CameraID: "held-1", Reason: "case 7"}); err != nil {
			t.Fatal(err)
		}
		f.SeedDays(t, now, single, cameraNames(cameras)...)
		f.Run(t)
		want := retention.Counts{DevicesTotal: 3, DevicesDone: 2, DevicesHeld: 1, MetadataRows: expired(cameras), IndexRows: expired(cameras)}
		cutoff := now.Add(-policy.Days(3))

		dry := f.Purge(t, retention.StartRequest{Kinds: single, Cutoff: cutoff, DryRun: true})
		checkHeldCounts(t, "dry run", dry, want)
		f.CheckKept(t, now, images.Single, map[string]int{"cam-a": 0, "cam-b": 0, "held-1": 0})

		j := f.Purge(t, retention.StartRequest{Kinds: single, Cutoff: cutoff})
		checkHeldCounts(t, "purge by cutoff", j, want)
		f.CheckKept(t, now, images.Single, cameras)
		f.CheckOutboxSpares(t, "held-1")

		// A policy that would purge it all keeps nothing of a held camera either.
		if _, err := f.Engine.Policies().CreatePolicy(t.Context(), policy.Policy{Scope: policy.ScopeCamera, Target: "held-1",
			Days: map[images.Kind]int{images.Single: 1}}); err != nil {
			t.Fatal(err)
		}
		j = f.Purge(t, retention.StartRequest{Kinds: single, UsePolicies: true})
		checkHeldCounts(t, "purge with policies", j, retention.Counts{DevicesTotal: 1, DevicesHeld: 1})
		f.CheckKept(t, now, images.Single, cameras)

		if err := f.Engine.Policies().DeleteHold(t.Context(), "held-1", ""); err != nil {
			t.Fatal(err)
		}
		j = f.Purge(t, retention.StartRequest{Kinds: single, Cutoff: cutoff})
		checkHeldCounts(t, "purge once released", j, retention.Counts{DevicesTotal: 1, DevicesDone: 1, MetadataRows: 2, IndexRows: 2})
		cameras["held-1"] = 3
		f.CheckKept(t, now, images.Single, cameras)
	})
}

// testTheScheduleSparesAHold: the built-in schedule's purges by age, the
// schedule most deployments run, keep a held camera whole.
func testTheScheduleSparesAHold(t *testing.T, ts *suite) {
	single := []images.Kind{images.Single}
	opts, now := policyOptions()
	f := ts.open(t, opts)
	if _, err := f.Engine.Policies().CreateHold(t.Context(), policy.Hold{CameraID: "held-1"}); err != nil {
		t.Fatal(err)
	}
	f.SeedDays(t, now, single, "cam-a", "held-1")
	f.Run(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.Engine.RunSchedule(ctx, retention.Schedule{Retention: policy.Days(3), Interval: time.Hour})
	}()
	defer func() {
		cancel()
		<-done
	}()
	deadline := time.After(patience)
	for {
		jobs, _, err := f.Engine.List(t.Context(), 10, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(jobs) == 1 && jobs[0].State.Terminal() {
			checkHeldCounts(t, "scheduled purge", jobs[0], retention.Counts{DevicesTotal: 2, DevicesDone: 1, DevicesHeld: 1, MetadataRows: 2, IndexRows: 2})
			break
		}
		select {
		case <-f.Engine.Changed():
		case <-time.After(10 * time.Millisecond):
		case <-deadline:
			t.Fatalf("after %v: no scheduled purge ended", patience)
		}
	}
	f.CheckKept(t, now, images.Single, map[string]int{"cam-a": 3, "held-1": 0})
}

// testAHoldPlacedDuringAPurgeSparesTheCamerasNotBegun: the holds are read
// again before each embedded section and each queue task, so a hold placed
// once a purge has found its cameras, before the held camera's deletes
// begin, spares it, counted held, index rows and all.
func testAHoldPlacedDuringAPurgeSparesTheCamerasNotBegun(t *testing.T, ts *suite) {
	single := []images.Kind{images.Single}
	ts.each(t, func(t *testing.T, open func(*testing.T, Options) *Fixture) {
		cameras := map[string]int{"cam-a": 3, "cam-b": 3, "cam-c": 3}
		opts, now := policyOptions()
		opts.SectionCameras, opts.GroupSize = 1, 1
		f := open(t, opts)
		f.SeedDays(t, now, single, cameraNames(cameras)...)
		var placed atomic.Bool
		f.OpenEngine(t, &HookedBackend{Backend: f.Base, Before: func(table, op string, _ []store.Key) error {
			// The first section (cam-a's) or the first task's count: the
			// job has found its cameras, and cam-c's deletes are to come.
			first := op == "exclusive" || (strings.EqualFold(table, queue.DefaultTasksTable) && op == "update")
			if first && placed.CompareAndSwap(false, true) {
				_, err := f.Engine.Policies().CreateHold(t.Context(), policy.Hold{CameraID: "cam-c"})
				return err
			}
			return nil
		}})
		f.Run(t)
		j := f.Purge(t, retention.StartRequest{Kinds: single, Cutoff: now.Add(-policy.Days(3))})
		if !placed.Load() {
			t.Fatal("the hold was never placed")
		}
		cameras["cam-c"] = 0
		checkHeldCounts(t, "purge", j, retention.Counts{DevicesTotal: 3, DevicesDone: 2, DevicesHeld: 1, MetadataRows: 4, IndexRows: 4})
		f.CheckKept(t, now, images.Single, cameras)
	})
}

func checkHeldCounts(t *testing.T, what string, j *retention.Job, want retention.Counts) {
	t.Helper()
	if j.State != retention.Succeeded {
		t.Errorf("%s: %s (%s), want succeeded", what, j.State, j.Error)
	}
	if got := j.Totals(); got != want {
		t.Errorf("%s: counts %+v, want %+v", what, got, want)
	}
}

// CheckOutboxSpares checks that no image of the camera is in the outbox of
// deleted images.
func (f *Fixture) CheckOutboxSpares(t *testing.T, camera string) {
	t.Helper()
	deleted := deletedAfter(t, f, "")
	for _, d := range deleted {
		if d.CameraID == camera {
			t.Errorf("the outbox names %s's image of %s as deleted", camera, d.CapturedAt)
		}
	}
	if len(deleted) == 0 {
		t.Error("the outbox is empty: nothing checks it")
	}
}
