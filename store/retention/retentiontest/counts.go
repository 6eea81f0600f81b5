package retentiontest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention"
	"github.com/metadatad/metadatad/store/retention/queue"
)

// expiredCreator creates images of the fixture's cameras with capture times
// before the boundary, each at its own instant, and counts them.
type expiredCreator struct {
	repo    *images.Repository
	next    atomic.Int64
	created atomic.Int64
}

// newExpiredCreator creates single images on the fixture's store directly,
// past any hook the engine's backend has.
func newExpiredCreator(t *testing.T, f *Fixture) *expiredCreator {
	t.Helper()
	direct, err := images.Open(t.Context(), f.Base, images.Options{Kind: images.Single})
	if err != nil {
		t.Fatal(err)
	}
	return &expiredCreator{repo: direct}
}

func (c *expiredCreator) create(ctx context.Context, camera int) error {
	// Between the seeded images (20 s apart), all before the boundary.
	at := base.Add(time.Second + time.Duration(c.next.Add(1))*time.Millisecond)
	if _, err := c.repo.Create(ctx, images.Image{CameraID: fmt.Sprintf("cam-%03d", camera), CapturedAt: at}); err != nil {
		return err
	}
	c.created.Add(1)
	return nil
}

// testCountsIncludeExpiredCreatesDuringThePurge: cameras keep uploading
// images with expired capture times (a backlog) while a purge runs. Some
// land between a camera's count and its delete, on purpose: each task's
// first record after counting creates one for every camera. The job's
// counts must equal the rows that are gone, primary and index.
func testCountsIncludeExpiredCreatesDuringThePurge(t *testing.T, ts *suite) {
	ts.each(t, func(t *testing.T, newFixture func(*testing.T, Options) *Fixture) {
		for _, plain := range []bool{false, true} {
			t.Run(map[bool]string{false: "range and key deletes", true: "batches only"}[plain], func(t *testing.T) {
				// Each task is worked by one delivery at a time: a second
				// one, after a visibility lost on a loaded machine, is the
				// case the counts cannot follow (see Counts.MetadataRows).
				opts := quickOptions()
				opts.VisibilityTimeout = 5 * time.Second
				f := ts.open(t, opts)
				creator := newExpiredCreator(t, f)
				var mu sync.Mutex
				recorded := map[store.Key]bool{}
				hooked := &HookedBackend{Backend: f.Base, Plain: plain, Before: func(table, op string, keys []store.Key) error {
					if table != queue.DefaultTasksTable || op != "update" {
						return nil
					}
					mu.Lock()
					first := !recorded[keys[0]]
					recorded[keys[0]] = true
					mu.Unlock()
					if !first {
						return nil
					}
					// The task's cameras are counted and about to be deleted.
					for c := range cameras {
						if err := creator.create(t.Context(), c); err != nil {
							t.Errorf("create between count and delete: %v", err)
						}
					}
					return nil
				}}
				f.OpenEngine(t, hooked)
				f.Seed(t, cameras)
				before := f.Census(t, images.Single, base.Add(2*time.Minute))
				f.Run(t)

				// Stopped between creates, never during one: a create cut
				// short may land without being counted.
				var stop atomic.Bool
				var uploads sync.WaitGroup
				uploads.Go(func() {
					for i := 0; !stop.Load(); i++ {
						if err := creator.create(t.Context(), i%cameras); err != nil {
							t.Errorf("create during the purge: %v", err)
						}
					}
				})
				j := f.Purge(t, retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: cutoff})
				stop.Store(true)
				uploads.Wait()
				if j.State != retention.Succeeded {
					t.Fatalf("state %s (%s)", j.State, j.Error)
				}
				if len(recorded) == 0 {
					t.Fatal("no task was recorded after its count: no create landed between a count and a delete")
				}
				after := f.Census(t, images.Single, j.Boundary())
				created := creator.created.Load()
				got := j.Totals()
				if gone := before.PrimaryOld + created - after.PrimaryOld; got.MetadataRows != gone {
					t.Errorf("metadata_rows_deleted %d, but %d primary rows are gone (%d expired, %d created during the purge, %d left)",
						got.MetadataRows, gone, before.PrimaryOld, created, after.PrimaryOld)
				}
				if gone := before.IndexOld + created - after.IndexOld; got.IndexRows != gone {
					t.Errorf("index_rows_deleted %d, but %d index rows are gone (%d expired, %d created during the purge, %d left)",
						got.IndexRows, gone, before.IndexOld, created, after.IndexOld)
				}
				if after.PrimaryNew != before.PrimaryNew || after.IndexNew != before.IndexNew {
					t.Errorf("young rows touched: %+v, before %+v", after, before)
				}
			})
		}
	})
}

// testUnrecordedDeleteFlagsItsCount: a task's first delivery counts its
// cameras, images of expired instants land, its delete removes them all,
// then the record of what it removed is lost (a lost store answer, as a
// crash would). The next delivery finds fewer rows than were counted: the
// count it keeps, the one taken before the first delete, misses the rows
// created meanwhile, and the job must say so. A purge whose deliveries all
// record their deletes must not.
func testUnrecordedDeleteFlagsItsCount(t *testing.T, ts *suite) {
	ts.each(t, func(t *testing.T, newFixture func(*testing.T, Options) *Fixture) {
		for _, lose := range []bool{false, true} {
			t.Run(map[bool]string{false: "every delete recorded", true: "a delete's record lost"}[lose], func(t *testing.T) {
				opts := quickOptions()
				opts.VisibilityTimeout = time.Second
				f := ts.open(t, opts)
				creator := newExpiredCreator(t, f)
				var mu sync.Mutex
				updates := map[store.Key]int{}
				lost := 0
				hooked := &HookedBackend{Backend: f.Base, Before: func(table, op string, keys []store.Key) error {
					if table != queue.DefaultTasksTable || op != "update" {
						return nil
					}
					mu.Lock()
					updates[keys[0]]++
					n := updates[keys[0]]
					loseThis := n == 2 && lose && lost == 0
					if loseThis {
						lost++
					}
					mu.Unlock()
					switch {
					case n == 1:
						// Counted, about to delete: images land in between.
						for c := range cameras {
							if err := creator.create(t.Context(), c); err != nil {
								t.Errorf("create between count and delete: %v", err)
							}
						}
					case loseThis:
						return errors.New("test: the store's answer is lost")
					}
					return nil
				}}
				f.OpenEngine(t, hooked)
				f.Seed(t, cameras)
				before := f.Census(t, images.Single, base.Add(2*time.Minute))
				f.Run(t)
				j := f.Purge(t, retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: cutoff})
				if j.State != retention.Succeeded {
					t.Fatalf("state %s (%s)", j.State, j.Error)
				}
				mu.Lock()
				lostAny := lost > 0
				mu.Unlock()
				if lose && !lostAny {
					t.Fatal("no delete's record was lost")
				}
				after := f.Census(t, images.Single, j.Boundary())
				gone := before.PrimaryOld + creator.created.Load() - after.PrimaryOld
				got := j.Totals()
				switch {
				case !lose && (got.MetadataRows != gone || got.MetadataRowsLowerBound):
					t.Errorf("metadata_rows_deleted %d (lower bound: %v), %d primary rows gone; want them equal and exact",
						got.MetadataRows, got.MetadataRowsLowerBound, gone)
				case lose && (got.MetadataRows >= gone || !got.MetadataRowsLowerBound):
					t.Errorf("metadata_rows_deleted %d (lower bound: %v), %d primary rows gone; want it short and flagged",
						got.MetadataRows, got.MetadataRowsLowerBound, gone)
				}
				// One index row per primary row, exact or short with it.
				if got.IndexRows != got.MetadataRows {
					t.Errorf("index_rows_deleted %d, metadata_rows_deleted %d: want one per primary row", got.IndexRows, got.MetadataRows)
				}
				if gone := before.IndexOld + creator.created.Load() - after.IndexOld; !lose && got.IndexRows != gone {
					t.Errorf("index_rows_deleted %d, %d index rows gone; want them equal", got.IndexRows, gone)
				}
			})
		}
	})
}
