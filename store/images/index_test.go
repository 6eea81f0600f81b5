package images_test

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/pebble"
)

// nineteenDigits is a camera id that is also a valid row key (inverted
// ticks of an instant in the year 6090), so "<row key>_<camera>" and
// "<camera>_<row key>" both read as either form by their digits alone.
const nineteenDigits = "1234567890123456789"

func TestParseIndexKey(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 2, 30, 0, time.UTC)
	rk := store.InvertedTicksRowKey(at)
	// A second row key of the same minute, as a camera id: its halves read
	// both ways, each in the partition's minute.
	sameMinute := store.InvertedTicksRowKey(at.Add(time.Second))
	for _, tc := range []struct {
		name, partition, rowKey string
		camera, primary         string
		ok                      bool
	}{
		{"own form", "202601010002", rk + "_cam-1", "cam-1", rk, true},
		{"fleet form", "202601010002", "cam-1_" + rk, "cam-1", rk, true},
		{"own form, sharded partition", "202601010002_7", rk + "_cam-1", "cam-1", rk, true},
		{"own form, camera with underscores", "202601010002", rk + "_a_b_c", "a_b_c", rk, true},
		{"fleet form, camera with underscores", "202601010002", "a_b_c_" + rk, "a_b_c", rk, true},
		{"own form, 19-digit camera", "202601010002", rk + "_" + nineteenDigits, nineteenDigits, rk, true},
		{"fleet form, 19-digit camera", "202601010002", nineteenDigits + "_" + rk, nineteenDigits, rk, true},
		{"both halves in the minute", "202601010002", rk + "_" + sameMinute, "", "", false},
		{"row key of another minute", "202601010003", rk + "_cam-1", "", "", false},
		{"no separator", "202601010002", rk, "", "", false},
		{"not a row key", "202601010002", "cam-1_cam-2", "", "", false},
		{"partition not a minute", "p", rk + "_cam-1", "", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			camera, primary, ok := images.ParseIndexKey(tc.partition, tc.rowKey)
			if camera != tc.camera || primary != tc.primary || ok != tc.ok {
				t.Errorf("ParseIndexKey(%q, %q) = %q, %q, %v; want %q, %q, %v",
					tc.partition, tc.rowKey, camera, primary, ok, tc.camera, tc.primary, tc.ok)
			}
		})
	}
}

// TestIndexScanReadsBothForms: index rows written by this service, rows in
// the fleet's key form, and rows whose keys read both ways (told apart by
// their DeviceId) all come back with their own camera and primary row, on
// pages of every size, however the forms are mixed.
func TestIndexScanReadsBothForms(t *testing.T) {
	ctx := t.Context()
	db := openDB(t)
	repo, err := images.Open(ctx, db, images.Options{Kind: images.Single})
	if err != nil {
		t.Fatal(err)
	}
	_, index := repo.Tables()
	type want struct{ camera, rowKey string }
	expect := map[store.Key]want{}
	for i := range 40 {
		at := capture.Add(time.Duration(i) * time.Second)
		rk := store.InvertedTicksRowKey(at)
		camera := fmt.Sprintf("cam-%d", i%3)
		if i%4 == 3 {
			camera = nineteenDigits
		}
		partition := store.MinutePartitionKey(at)
		switch i % 5 {
		case 0, 1: // written by this service
			img, err := repo.Create(ctx, images.Image{CameraID: camera, CapturedAt: at})
			if err != nil {
				t.Fatal(err)
			}
			expect[store.Key{PartitionKey: partition, RowKey: images.IndexRowKey(img.RowKey, camera)}] = want{camera, img.RowKey}
		case 2, 3: // the fleet's form
			k := store.Key{PartitionKey: partition, RowKey: camera + "_" + rk}
			insertIndexRow(t, index, k, camera, rk)
			expect[k] = want{camera, rk}
		case 4: // a camera id that is a row key of the same minute
			other := store.InvertedTicksRowKey(at.Add(500 * time.Millisecond))
			k := store.Key{PartitionKey: partition, RowKey: rk + "_" + other}
			insertIndexRow(t, index, k, other, rk)
			expect[k] = want{other, rk}
		}
	}
	for _, limit := range []int{1, 2, 7, 0} {
		scan := repo.ScanIndex(store.Range{}, limit)
		var got []images.IndexRow
		for pages := 0; ; pages++ {
			if pages > 1000 {
				t.Fatalf("limit %d: the scan does not end", limit)
			}
			rows, more, err := scan.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, rows...)
			if !more {
				break
			}
		}
		if len(got) != len(expect) {
			t.Fatalf("limit %d: scan read %d rows, want %d", limit, len(got), len(expect))
		}
		if !slices.IsSortedFunc(got, func(a, b images.IndexRow) int {
			return compareKeys(a.Key, b.Key)
		}) {
			t.Errorf("rows out of key order")
		}
		for _, row := range got {
			w, ok := expect[row.Key]
			if !ok || row.CameraID != w.camera || row.RowKey != w.rowKey {
				t.Errorf("row %v: camera %q, row key %q; want %q, %q", row.Key, row.CameraID, row.RowKey, w.camera, w.rowKey)
			}
			if row.ETag == "" || row.Timestamp.IsZero() {
				t.Errorf("row %v: no ETag or Timestamp", row.Key)
			}
		}
	}
}

func compareKeys(a, b store.Key) int {
	if a.PartitionKey != b.PartitionKey {
		if a.PartitionKey < b.PartitionKey {
			return -1
		}
		return 1
	}
	switch {
	case a.RowKey < b.RowKey:
		return -1
	case a.RowKey > b.RowKey:
		return 1
	}
	return 0
}

func insertIndexRow(t *testing.T, index store.Table, k store.Key, camera, rowKey string) {
	t.Helper()
	_, err := index.Insert(t.Context(), store.Entity{PartitionKey: k.PartitionKey, RowKey: k.RowKey,
		Properties: store.Properties{images.PropDeviceID: camera, images.PropMetadataRowKey: rowKey}})
	if err != nil {
		t.Fatal(err)
	}
}

// TestOrphaned: the one test of both purge designs' orphan passes. An
// index row whose primary row is there is kept, one whose primary row is
// gone is an orphan, as is one naming a camera but no primary row; one
// naming no camera is never judged one.
func TestOrphaned(t *testing.T) {
	ctx := t.Context()
	repo, err := images.Open(ctx, openDB(t), images.Options{Kind: images.Single})
	if err != nil {
		t.Fatal(err)
	}
	kept, err := repo.Create(ctx, images.Image{CameraID: "cam-1", CapturedAt: capture})
	if err != nil {
		t.Fatal(err)
	}
	gone, err := repo.Create(ctx, images.Image{CameraID: "cam-1", CapturedAt: capture.Add(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	primary, _ := repo.Tables()
	if err := primary.Delete(ctx, "cam-1", gone.RowKey, ""); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		row  images.IndexRow
		want bool
	}{
		{"primary row there", images.IndexRow{CameraID: "cam-1", RowKey: kept.RowKey}, false},
		{"primary row gone", images.IndexRow{CameraID: "cam-1", RowKey: gone.RowKey}, true},
		{"another camera's row key", images.IndexRow{CameraID: "cam-2", RowKey: kept.RowKey}, true},
		{"no primary row key", images.IndexRow{CameraID: "cam-1"}, true},
		{"no camera", images.IndexRow{RowKey: gone.RowKey}, false},
	} {
		got, err := repo.Orphaned(ctx, tc.row)
		if err != nil || got != tc.want {
			t.Errorf("%s: Orphaned = %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
}

// TestIndexRowCarriesImage shows where an index row carries its image:
// written with its primary row in one transaction (a Create and a
// BatchCreate on the embedded store), it holds the image's properties and
// WalkIndex reads the image from it; written index first (Azure), and on
// an index row of the .NET form, only the way back, which WalkIndex leaves
// to a read of the primary row.
func TestIndexRowCarriesImage(t *testing.T) {
	for _, tc := range []struct {
		name        string
		backend     func(*pebble.DB) store.Backend
		batch       bool
		wantCarried bool
	}{
		{"transactor, create", func(db *pebble.DB) store.Backend { return db }, false, true},
		{"transactor, batch", func(db *pebble.DB) store.Backend { return db }, true, true},
		{"index first, create", func(db *pebble.DB) store.Backend { return plainBackend{Backend: db} }, false, false},
		{"index first, batch", func(db *pebble.DB) store.Backend { return plainBackend{Backend: db} }, true, false},
	} {
		for _, kind := range images.Kinds {
			t.Run(fmt.Sprintf("%s, %v", tc.name, kind), func(t *testing.T) {
				testIndexRowCarriesImage(t, tc.backend, kind, tc.batch, tc.wantCarried)
			})
		}
	}
	t.Run("fleet form", func(t *testing.T) {
		db := openDB(t)
		repo, err := images.Open(t.Context(), db, images.Options{Kind: images.Single})
		if err != nil {
			t.Fatal(err)
		}
		rowKey := store.InvertedTicksRowKey(capture)
		_, index := repo.Tables()
		if _, err := index.Insert(t.Context(), store.Entity{PartitionKey: "202601010002", RowKey: "cam-9_" + rowKey}); err != nil {
			t.Fatal(err)
		}
		ir, _, carried := walkOne(t, repo)
		if carried {
			t.Fatal("a row without properties carried an image")
		}
		if ir.CameraID != "cam-9" || ir.RowKey != rowKey {
			t.Fatalf("WalkIndex told %s/%s from the keys, want cam-9/%s", ir.CameraID, ir.RowKey, rowKey)
		}
	})
}

// walkOne walks the index of repo, which must hold one row, and returns
// what WalkIndex told of it.
func walkOne(t *testing.T, repo *images.Repository) (images.IndexRow, images.Image, bool) {
	t.Helper()
	var (
		rows    int
		ir      images.IndexRow
		img     images.Image
		carried bool
	)
	next, err := repo.WalkIndex(t.Context(), store.Range{}, nil, 10, func(row images.IndexRow, i images.Image, c bool) error {
		rows++
		ir, img, carried = row, i, c
		return nil
	})
	if err != nil || rows != 1 || next != nil {
		t.Fatalf("WalkIndex: %d rows, next %v, %v; want one row", rows, next, err)
	}
	return ir, img, carried
}

// testIndexRowCarriesImage creates an image of kind, with every property an
// image of its kind has, and checks what its index row holds and what
// WalkIndex reads from it.
func testIndexRowCarriesImage(t *testing.T, backend func(*pebble.DB) store.Backend, kind images.Kind, batch, wantCarried bool) {
	img := images.Image{CameraID: "cam-1", CapturedAt: capture.Add(123), BlobURI: "https://blobs.example/1.jpg",
		ContentType: "image/jpeg", SizeBytes: 42, Width: 640, Height: 480, Attributes: map[string]string{"site": "north"},
		IsClearDay: kind == images.Pano}
	if kind == images.PreStitch {
		img.PanoImageCorrelationID = "pano-7"
	}
	repo, err := images.Open(t.Context(), backend(openDB(t)), images.Options{Kind: kind})
	if err != nil {
		t.Fatal(err)
	}
	var want images.Image
	if batch {
		r := repo.BatchCreate(t.Context(), []images.Image{img})
		want, err = r[0].Image, r[0].Err
	} else {
		want, err = repo.Create(t.Context(), img)
	}
	if err != nil {
		t.Fatal(err)
	}
	if stored, err := repo.Image(t.Context(), want.CameraID, want.RowKey); err != nil || !reflect.DeepEqual(stored, want) {
		t.Fatalf("the primary row reads %+v (%v), Create returned %+v", stored, err, want)
	}
	_, index := repo.Tables()
	page, err := index.Scan(t.Context(), store.Scan{})
	if err != nil || len(page.Entities) != 1 {
		t.Fatalf("index page: %d rows, %v", len(page.Entities), err)
	}
	if _, has := page.Entities[0].Properties[images.PropBlobURI]; has != wantCarried {
		t.Fatalf("index row properties %v: carries the image %v, want %v", page.Entities[0].Properties, has, wantCarried)
	}
	ir, got, carried := walkOne(t, repo)
	if carried != wantCarried {
		t.Fatalf("WalkIndex: carried %v, want %v", carried, wantCarried)
	}
	if carried && !reflect.DeepEqual(got, want) {
		t.Fatalf("carried image %+v, want %+v", got, want)
	}
	if ir.CameraID != "cam-1" || ir.RowKey != want.RowKey {
		t.Fatalf("WalkIndex's row: %+v", ir)
	}
}
