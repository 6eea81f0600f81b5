package retentiontest

import (
	"fmt"
	"slices"
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

// testPolicyChangesDuringPurge: a purge applies each camera's policy as it
// stood when the plan reached the camera, so a policy removed after that
// takes effect at the next purge; a hold placed after the plan reached the
// camera, before its delete, spares it, counted as held, index rows and all.
func testPolicyChangesDuringPurge(t *testing.T, ts *suite) {
	ts.each(t, func(t *testing.T, open func(*testing.T, Options) *Fixture) {
		opts, now := policyOptions()
		f := open(t, opts)
		single := setPolicies(t, f.Engine)
		f.SeedDays(t, now, []images.Kind{images.Single}, cameraNames(single)...)
		var once sync.Map
		f.OpenEngine(t, &HookedBackend{Backend: f.Base, Before: func(table, op string, keys []store.Key) error {
			if !strings.EqualFold(table, queue.DefaultTasksTable) || op != "batch" {
				return nil
			}
			for _, k := range keys {
				camera, ok := strings.CutPrefix(k.RowKey, "b_single_")
				if !ok {
					continue
				}
				if _, done := once.LoadOrStore(camera, true); done {
					continue
				}
				var err error
				switch camera {
				case "cam-long":
					err = f.Engine.Policies().DeletePolicy(t.Context(), policy.ScopeCamera, "cam-long", "")
				case "site-a-cam1":
					_, err = f.Engine.Policies().CreateHold(t.Context(), policy.Hold{CameraID: camera})
				}
				if err != nil {
					return fmt.Errorf("test: %w", err)
				}
			}
			return nil
		}})
		f.Run(t)
		j := f.Purge(t, retention.StartRequest{Kinds: []images.Kind{images.Single}, UsePolicies: true})
		if _, ok := once.Load("site-a-cam1"); !ok {
			t.Fatal("the plan recorded no boundary for site-a-cam1")
		}
		single["site-a-cam1"] = 0
		want := expired(single)
		if got := j.Totals(); got.MetadataRows != want || got.IndexRows != want || got.DevicesHeld != 2 || got.DevicesDone != 5 {
			t.Errorf("counts %+v, want %d rows of each table, 5 cameras done and 2 held (held-1 before, site-a-cam1 during)", got, want)
		}
		f.CheckKept(t, now, images.Single, single)

		// cam-long now falls to the default, site-a-cam1 still held.
		j = f.Purge(t, retention.StartRequest{Kinds: []images.Kind{images.Single}, UsePolicies: true})
		if got := j.Totals(); got.MetadataRows != 1 || got.IndexRows != 1 {
			t.Errorf("next purge: counts %+v, want cam-long's one image more", got)
		}
		single["cam-long"] = 3
		f.CheckKept(t, now, images.Single, single)
	})
}

// testPolicyRemovedBeforeThePlanReachesTheCamera: a camera's own policy
// is read as the plan reaches the camera, so one removed during the plan,
// before the camera, already gives way this purge to the prefix or default
// policy; the default and the prefix policies are read as the plan's scan
// starts, so a prefix policy removed then takes effect at the next purge.
func testPolicyRemovedBeforeThePlanReachesTheCamera(t *testing.T, ts *suite) {
	cases := []struct {
		name string
		// scope and target name the policy removed; camera is the one it
		// governs, which sorts after the plan's first task.
		scope          policy.Scope
		target, camera string
		// now and next are the camera's retention in this purge and the next.
		now, next int
	}{
		{"own policy", policy.ScopeCamera, "cam-long", "cam-long", 3, 3},
		{"prefix policy", policy.ScopePrefix, "acme-x-", "acme-x-1", 4, 2},
	}
	ts.each(t, func(t *testing.T, open func(*testing.T, Options) *Fixture) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				opts, now := policyOptions()
				f := open(t, opts)
				single := setPolicies(t, f.Engine)
				f.SeedDays(t, now, []images.Kind{images.Single}, cameraNames(single)...)
				// The cameras each boundary batch records, in order: the
				// policy goes at the first, which must not hold the camera.
				var mu sync.Mutex
				var batches [][]string
				var removed atomic.Bool
				f.OpenEngine(t, &HookedBackend{Backend: f.Base, Before: func(table, op string, keys []store.Key) error {
					if !strings.EqualFold(table, queue.DefaultTasksTable) || op != "batch" {
						return nil
					}
					var planned []string
					for _, k := range keys {
						if camera, ok := strings.CutPrefix(k.RowKey, "b_single_"); ok {
							planned = append(planned, camera)
						}
					}
					if len(planned) == 0 {
						return nil
					}
					mu.Lock()
					batches = append(batches, planned)
					mu.Unlock()
					if removed.CompareAndSwap(false, true) {
						if err := f.Engine.Policies().DeletePolicy(t.Context(), c.scope, c.target, ""); err != nil {
							return fmt.Errorf("test: %w", err)
						}
					}
					return nil
				}})
				f.Run(t)
				j := f.Purge(t, retention.StartRequest{Kinds: []images.Kind{images.Single}, UsePolicies: true})
				if j.State != retention.Succeeded {
					t.Fatalf("purge ended %s (%s)", j.State, j.Error)
				}
				mu.Lock()
				reached := slices.IndexFunc(batches, func(b []string) bool { return slices.Contains(b, c.camera) })
				mu.Unlock()
				if reached < 1 {
					t.Fatalf("boundary batches %v: want %s planned after the first, at which its policy went", batches, c.camera)
				}
				single[c.camera] = c.now
				want := expired(single)
				if got := j.Totals(); got.MetadataRows != want || got.IndexRows != want || got.DevicesHeld != 1 || got.DevicesDone != 6 {
					t.Errorf("counts %+v, want %d rows of each table, 6 cameras done, held-1 held", got, want)
				}
				f.CheckKept(t, now, images.Single, single)

				j = f.Purge(t, retention.StartRequest{Kinds: []images.Kind{images.Single}, UsePolicies: true})
				if more := int64(kept(c.now) - kept(c.next)); j.Totals().MetadataRows != more || j.Totals().IndexRows != more {
					t.Errorf("next purge: counts %+v, want %s's %d images more", j.Totals(), c.camera, more)
				}
				single[c.camera] = c.next
				f.CheckKept(t, now, images.Single, single)
			})
		}
	})
}
