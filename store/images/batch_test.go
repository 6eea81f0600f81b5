package images_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
)

// TestBatchCreateResultPerImage: new images of several cameras and
// minutes, bad ones, retries and conflicts (with stored images and within
// the call) each get their own result, and every image reported stored
// has its primary, index and pointer rows.
func TestBatchCreateResultPerImage(t *testing.T) {
	for _, bc := range backends {
		t.Run(bc.name, func(t *testing.T) {
			repo := openRepo(t, bc.open(t), images.PreStitch)
			stored := create(t, repo, images.Image{CameraID: "cam-a", CapturedAt: minute(1), PanoImageCorrelationID: "p1", BlobURI: "x"})
			img := func(camera string, n int, blob string) images.Image {
				return images.Image{CameraID: camera, CapturedAt: minute(n), PanoImageCorrelationID: fmt.Sprintf("p%d", n), BlobURI: blob}
			}
			huge := img("cam-b", 9, "y")
			huge.Attributes = map[string]string{"a": strings.Repeat("x", store.MaxValueBytes)}
			batch := []images.Image{
				img("cam-a", 2, "y"),                        // 0 created
				img("cam-b", 2, "y"),                        // 1 created: same minute, other camera
				img("cam-a", 1, "x"),                        // 2 existed: identical to the stored one
				img("cam-a", 1, "different"),                // 3 conflict with the stored one
				{CameraID: "bad/id", CapturedAt: minute(3)}, // 4 invalid key
				huge,                   // 5 value over the limit
				img("cam-b", 5, "y"),   // 6 created
				img("cam-b", 5, "y"),   // 7 existed: a copy of 6
				img("cam-b", 5, "z"),   // 8 conflict with 6
				img("cam-c", 100, "y"), // 9 created
				{CameraID: "cam-a", CapturedAt: minute(3)}, // 10 created, no correlation
				img("cam-a", 4, "y"),                       // 11 created
			}
			type want struct {
				existed bool
				err     error
			}
			wants := []want{{}, {}, {existed: true}, {err: store.ErrAlreadyExists}, {err: store.ErrInvalidKey},
				{err: store.ErrTooLarge}, {}, {existed: true}, {err: store.ErrAlreadyExists}, {}, {}, {}}
			results := repo.BatchCreate(t.Context(), batch)
			if len(results) != len(batch) {
				t.Fatalf("%d results for %d images", len(results), len(batch))
			}
			primary, index := repo.Tables()
			for i, res := range results {
				w := wants[i]
				if res.Existed != w.existed || (w.err == nil) != (res.Err == nil) || (w.err != nil && !errors.Is(res.Err, w.err)) {
					t.Errorf("image %d: existed %v, err %v; want existed %v, err %v", i, res.Existed, res.Err, w.existed, w.err)
					continue
				}
				if res.Err != nil {
					continue
				}
				in := batch[i]
				if res.Image.CameraID != in.CameraID || !res.Image.CapturedAt.Equal(in.CapturedAt) || res.Image.RowKey != store.InvertedTicksRowKey(in.CapturedAt) {
					t.Errorf("image %d: result %+v", i, res.Image)
				}
				if _, err := primary.Get(t.Context(), in.CameraID, res.Image.RowKey); err != nil {
					t.Errorf("image %d: primary row: %v", i, err)
				}
				if _, err := index.Get(t.Context(), images.IndexPartitionKey(in.CapturedAt, in.CameraID, 0), images.IndexRowKey(res.Image.RowKey, in.CameraID)); err != nil {
					t.Errorf("image %d: index row: %v", i, err)
				}
				if in.PanoImageCorrelationID != "" {
					got, err := correlated(t.Context(), repo, in.CameraID, in.PanoImageCorrelationID)
					if err != nil || len(got) != 1 || got[0].BlobURI != "x" && got[0].BlobURI != "y" {
						t.Errorf("image %d: by correlation %+v, %v", i, got, err)
					}
				}
			}
			if got, err := primary.Get(t.Context(), "cam-a", stored.RowKey); err != nil || got.Properties[images.PropBlobURI] != "x" {
				t.Errorf("stored image after a conflicting batch: %+v, %v", got, err)
			}
		})
	}
}

// TestBatchCreateThousandImages: a full batch over 10 cameras and 100
// minutes, pano, keeps every pair of rows and each camera's clear-day
// pointer; a repeat of the whole call reports every image as existing.
func TestBatchCreateThousandImages(t *testing.T) {
	for _, bc := range backends {
		t.Run(bc.name, func(t *testing.T) {
			repo := openRepo(t, bc.open(t), images.Pano)
			var batch []images.Image
			for n := range 100 {
				for c := range 10 {
					batch = append(batch, images.Image{CameraID: fmt.Sprintf("cam-%d", c), CapturedAt: minute(n), IsClearDay: n == 37 || n == 12})
				}
			}
			for pass, existed := range []bool{false, true} {
				for i, res := range repo.BatchCreate(t.Context(), batch) {
					if res.Err != nil || res.Existed != existed {
						t.Fatalf("pass %d, image %d: existed %v, %v", pass, i, res.Existed, res.Err)
					}
				}
			}
			checkStored(t, repo, batch)
			for c := range 10 {
				if got, ok := latestClearDay(t, repo, fmt.Sprintf("cam-%d", c)); !ok || !got.Equal(minute(37)) {
					t.Errorf("cam-%d: latest clear day %s, want minute 37", c, got)
				}
			}
			if res := repo.BatchCreate(t.Context(), make([]images.Image, images.MaxBatchCreate+1)); !errors.Is(res[0].Err, store.ErrInvalidEntity) {
				t.Errorf("batch over the limit: %v", res[0].Err)
			}
		})
	}
}

// checkStored fails unless every image has its primary and index rows.
func checkStored(t *testing.T, repo *images.Repository, imgs []images.Image) {
	t.Helper()
	primary, index := repo.Tables()
	for _, img := range imgs {
		rk := store.InvertedTicksRowKey(img.CapturedAt)
		if _, err := primary.Get(t.Context(), img.CameraID, rk); err != nil {
			t.Fatalf("%s at %s: primary row: %v", img.CameraID, img.CapturedAt, err)
		}
		if _, err := index.Get(t.Context(), images.IndexPartitionKey(img.CapturedAt, img.CameraID, 0), images.IndexRowKey(rk, img.CameraID)); err != nil {
			t.Fatalf("%s at %s: index row: %v", img.CameraID, img.CapturedAt, err)
		}
	}
}

// crashingBatches fails every write batch after the first few, as a
// process that dies in the middle of a call leaves the store.
type crashingBatches struct {
	store.Table
	left *atomic.Int64
}

func (c crashingBatches) Batch(ctx context.Context, ops []store.Op) error {
	if c.left.Add(-1) < 0 {
		return errors.New("injected: crashed")
	}
	return c.Table.Batch(ctx, ops)
}

// crashingTransactor fails every transaction after the first few.
type crashingTransactor struct {
	store.Backend
	left *atomic.Int64
}

func (c crashingTransactor) Transact(ctx context.Context, ops []store.TableOp) error {
	if c.left.Add(-1) < 0 {
		return errors.New("injected: crashed")
	}
	return c.Backend.(store.Transactor).Transact(ctx, ops)
}

// TestBatchCreateCrashLosesNoAcknowledgedImage: a batch cut off part way
// reports some images stored and the rest failed; every image reported
// stored has its rows and pointer, and a retry of the whole call stores the
// rest, reporting the first ones as existing.
func TestBatchCreateCrashLosesNoAcknowledgedImage(t *testing.T) {
	for _, tc := range []struct {
		name string
		// writes is how many write calls succeed before the crash.
		writes int64
		wrap   func(store.Backend, *atomic.Int64) store.Backend
	}{
		{"pebble", 4, func(b store.Backend, left *atomic.Int64) store.Backend { return crashingTransactor{b, left} }},
		// The first round of 100 images, those of cam-0 and cam-1, writes
		// 60 index batches (one a minute), then 2 primary ones.
		{"index first", 70, func(b store.Backend, left *atomic.Int64) store.Backend {
			return plainBackend{Backend: b, wrap: func(t store.Table) store.Table { return crashingBatches{t, left} }}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := openDB(t)
			var batch []images.Image
			for n := range 60 {
				for c := range 5 {
					batch = append(batch, images.Image{CameraID: fmt.Sprintf("cam-%d", c), CapturedAt: minute(n), PanoImageCorrelationID: fmt.Sprintf("p%d", n%7)})
				}
			}
			var left atomic.Int64
			left.Store(tc.writes)
			crashing := openRepo(t, tc.wrap(db, &left), images.PreStitch)
			var acked, failed []images.Image
			for i, res := range crashing.BatchCreate(t.Context(), batch) {
				if res.Err == nil {
					acked = append(acked, batch[i])
				} else {
					failed = append(failed, batch[i])
				}
			}
			if len(acked) == 0 || len(failed) == 0 {
				t.Fatalf("%d acknowledged, %d failed; want the crash in the middle", len(acked), len(failed))
			}
			healthy := openRepo(t, db, images.PreStitch)
			checkStored(t, healthy, acked)
			for _, img := range acked {
				got, err := correlated(t.Context(), healthy, img.CameraID, img.PanoImageCorrelationID)
				if err != nil || !containsAt(got, img) {
					t.Fatalf("acknowledged %s at %s not listed by correlation: %d images, %v", img.CameraID, img.CapturedAt, len(got), err)
				}
			}
			created := 0
			for i, res := range healthy.BatchCreate(t.Context(), batch) {
				if res.Err != nil {
					t.Fatalf("retry, image %d: %v", i, res.Err)
				}
				if !res.Existed {
					created++
				}
			}
			if created > len(failed) {
				t.Fatalf("retry created %d images, but only %d had failed", created, len(failed))
			}
			checkStored(t, healthy, batch)
			for _, id := range []string{"p0", "p3"} {
				got, err := correlated(t.Context(), healthy, "cam-2", id)
				if err != nil || len(got) < 8 {
					t.Fatalf("cam-2, %s after the retry: %d images, %v", id, len(got), err)
				}
			}
		})
	}
}

func containsAt(imgs []images.Image, want images.Image) bool {
	for _, img := range imgs {
		if img.CapturedAt.Equal(want.CapturedAt) {
			return true
		}
	}
	return false
}
