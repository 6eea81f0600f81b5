package retention_test

import (
	"testing"

	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention"
	"github.com/metadatad/metadatad/store/retention/policy"
	"github.com/metadatad/metadatad/store/retention/retentiontest"
)

// TestSparedCamerasCostNoPrimaryWork: a purge with policies, real or dry,
// does no primary-table work for the cameras it spares, whether their own
// policy keeps their rows or a legal hold does, though the index scan
// meets their rows among the expired ones; the check that spares them
// reads the policy and hold tables alone. (BenchmarkPurgeWithPolicies
// shows the same at scale.)
func TestSparedCamerasCostNoPrimaryWork(t *testing.T) {
	forEachQueueStore(t, func(t *testing.T, open func(*testing.T, retentiontest.Options) *fixture) {
		opts, now := policyOptions()
		f := open(t, opts)
		p := f.Engine.Policies()
		for _, pol := range []policy.Policy{
			{Scope: policy.ScopeDefault, Days: map[images.Kind]int{images.Single: 3}},
			{Scope: policy.ScopeCamera, Target: sparedPrefix + "own", Days: map[images.Kind]int{images.Single: policyDays + 5}},
		} {
			if _, err := p.CreatePolicy(t.Context(), pol); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := p.CreateHold(t.Context(), policy.Hold{CameraID: sparedPrefix + "held"}); err != nil {
			t.Fatal(err)
		}
		days := map[string]int{"cam-a": 3, "cam-b": 3, sparedPrefix + "own": 0, sparedPrefix + "held": 0}
		f.SeedDays(t, now, []images.Kind{images.Single}, cameraNames(days)...)
		ops := &opCounter{watch: sparedPrefix}
		f.OpenEngine(t, &countingBackend{Backend: f.Base, only: images.Single.DefaultTable(), c: ops})
		f.Run(t)

		want := expired(days)
		for _, dry := range []bool{true, false} {
			ops.reset()
			j := f.Purge(t, retention.StartRequest{Kinds: []images.Kind{images.Single}, UsePolicies: true, DryRun: dry})
			if j.State != retention.Succeeded {
				t.Fatalf("dry run %t: purge ended %s (%s)", dry, j.State, j.Error)
			}
			if got := j.Totals(); got.MetadataRows != want || got.IndexRows != want || got.DevicesDone != 2 {
				t.Errorf("dry run %t: counts %+v, want %d rows of each table of 2 cameras", dry, got, want)
			}
			if n := ops.watchedOps.Load(); n != 0 {
				t.Errorf("dry run %t: %d primary-table operations on the spared cameras, want none", dry, n)
			}
			if ops.reads.Load() == 0 {
				t.Errorf("dry run %t: no primary-table read counted at all: the counter sees nothing", dry)
			}
		}
		f.CheckKept(t, now, images.Single, days)
	})
}
