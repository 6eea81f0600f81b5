package server_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/metadatad/metadatad/store"
)

// TestCreate checks what a create returns and stores against the .NET
// system's fixed key vectors.
func TestCreate(t *testing.T) {
	cases := []struct {
		name       string
		capturedAt time.Time
		attributes map[string]string
		// wantCapturedAt is captured_at at tick precision.
		wantCapturedAt time.Time
		wantRowKey     string
		wantMinute     string
	}{
		{
			name:           "whole minute",
			capturedAt:     time.Date(2026, 1, 1, 0, 2, 0, 0, time.UTC),
			wantCapturedAt: time.Date(2026, 1, 1, 0, 2, 0, 0, time.UTC),
			wantRowKey:     "2516350750799999999",
			wantMinute:     "202601010002",
		},
		{
			name:           "nanoseconds truncated to 100 ns ticks",
			capturedAt:     time.Date(2026, 1, 1, 0, 2, 0, 123456789, time.UTC),
			wantCapturedAt: time.Date(2026, 1, 1, 0, 2, 0, 123456700, time.UTC),
			wantRowKey:     "2516350750798765432",
			wantMinute:     "202601010002",
		},
		{
			name:           "earliest instant 1601-01-01",
			capturedAt:     time.Date(1601, 1, 1, 0, 0, 0, 0, time.UTC),
			wantCapturedAt: time.Date(1601, 1, 1, 0, 0, 0, 0, time.UTC),
			wantRowKey:     "2650467743999999999",
			wantMinute:     "160101010000",
		},
		{
			name:           "latest instant 9999-12-31",
			capturedAt:     time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
			wantCapturedAt: time.Date(9999, 12, 31, 23, 59, 59, 999999900, time.UTC),
			wantRowKey:     "0000000000000000000",
			wantMinute:     "999912312359",
		},
		{
			name:           "attributes round-trip",
			capturedAt:     time.Date(2026, 1, 1, 0, 1, 0, 0, time.UTC),
			attributes:     map[string]string{"exposure": "1/250", "länge": "wide ✓ \"quoted\" <tag> & more", "empty": "", "": "no key"},
			wantCapturedAt: time.Date(2026, 1, 1, 0, 1, 0, 0, time.UTC),
			wantRowKey:     "2516350751399999999",
			wantMinute:     "202601010001",
		},
		{
			name:           "no attributes",
			capturedAt:     time.Date(2026, 1, 1, 0, 1, 0, 0, time.UTC),
			attributes:     map[string]string{},
			wantCapturedAt: time.Date(2026, 1, 1, 0, 1, 0, 0, time.UTC),
			wantRowKey:     "2516350751399999999",
			wantMinute:     "202601010001",
		},
	}
	forEachKind(t, func(t *testing.T, h *harness, k kind, c kindClient) {
		for i, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				img := sample("cam-"+string(rune('a'+i)), tc.capturedAt)
				img.Attributes = tc.attributes
				img.IsClearDay = true
				img.CorrelationID = "pano-42"
				img.RowKey = "ignored on input"
				want := k.forKind(img)
				want.CapturedAt, want.RowKey = tc.wantCapturedAt, tc.wantRowKey

				requireImage(t, mustCreate(t, c, img), want)
				got, err := c.getLatest(t.Context(), img.CameraID)
				requireOK(t, err, "get latest")
				requireImage(t, got, want)

				primary := rowsOf(h.rows(t, k.table), img.CameraID)
				if len(primary) != 1 || primary[0].RowKey != tc.wantRowKey {
					t.Fatalf("primary rows of %s: %s, want one with row key %s", img.CameraID, rowKeys(primary), tc.wantRowKey)
				}
				requireIndexRow(t, h, k, tc.wantMinute, tc.wantRowKey, img.CameraID)
			})
		}
	})
}

// TestCreateWritesBothRows checks the full contents of both tables of the
// kind after several creates, including two cameras capturing in the same
// instant, and that the other kinds' tables stay empty.
func TestCreateWritesBothRows(t *testing.T) {
	forEachKindOn(t, writePaths(), func(t *testing.T, h *harness, k kind, c kindClient) {
		same := time.Date(2026, 1, 1, 0, 2, 0, 0, time.UTC)
		imgs := []image{
			sample("cam-1", same),
			sample("cam-2", same),
			sample("cam-1", time.Date(2026, 1, 1, 0, 2, 59, 999999900, time.UTC)),
			sample("cam-1", time.Date(2026, 1, 1, 0, 3, 0, 0, time.UTC)),
			sample("cam-3", time.Date(2026, 1, 2, 13, 4, 5, 0, time.UTC)),
		}
		for _, img := range imgs {
			mustCreate(t, c, img)
		}

		var wantPrimary, wantIndex []string
		for _, img := range imgs {
			rk := store.InvertedTicksRowKey(img.CapturedAt)
			wantPrimary = append(wantPrimary, img.CameraID+"/"+rk)
			wantIndex = append(wantIndex, store.MinutePartitionKey(img.CapturedAt)+"/"+rk+"_"+img.CameraID)
		}
		slices.Sort(wantPrimary)
		slices.Sort(wantIndex)
		primary, index := h.rows(t, k.table), h.rows(t, k.index)
		if got := "[" + strings.Join(wantPrimary, " ") + "]"; rowKeys(primary) != got {
			t.Errorf("primary rows %s, want %s", rowKeys(primary), got)
		}
		if got := "[" + strings.Join(wantIndex, " ") + "]"; rowKeys(index) != got {
			t.Errorf("index rows %s, want %s", rowKeys(index), got)
		}
		rk := "2516350750799999999"
		requireIndexRow(t, h, k, "202601010002", rk, "cam-1")
		requireIndexRow(t, h, k, "202601010002", rk, "cam-2")
		for _, e := range primary {
			if e.Properties["CameraId"] != e.PartitionKey || e.Properties["BlobUri"] == "" {
				t.Errorf("primary row %s/%s has properties %v", e.PartitionKey, e.RowKey, e.Properties)
			}
		}
		for _, name := range tableNames() {
			if name != k.table && name != k.index {
				if rows := h.rows(t, name); len(rows) != 0 {
					t.Errorf("%s image creates wrote to table %s: %s", k.name, name, rowKeys(rows))
				}
			}
		}
	})
}

// TestCreateIsIdempotent checks that a repeated create succeeds and a
// different image at the same camera and instant is refused, leaving the
// stored one as it was.
func TestCreateIsIdempotent(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 2, 0, 0, time.UTC)
	original := sample("cam-1", at)
	original.Attributes = map[string]string{"exposure": "1/250", "lens": "wide"}
	cases := []struct {
		name string
		// only restricts the case to the kind whose message carries the changed field.
		only   string
		change func(img *image)
		want   codes.Code
	}{
		{name: "identical", change: func(*image) {}, want: codes.OK},
		{name: "identical but row_key set", change: func(img *image) { img.RowKey = "whatever" }, want: codes.OK},
		{name: "same tick, finer nanoseconds", change: func(img *image) { img.CapturedAt = at.Add(50 * time.Nanosecond) }, want: codes.OK},
		{name: "same attributes in another order", change: func(img *image) {
			img.Attributes = map[string]string{"lens": "wide", "exposure": "1/250"}
		}, want: codes.OK},
		{name: "different blob_uri", change: func(img *image) { img.BlobURI += "?v=2" }, want: codes.AlreadyExists},
		{name: "different content_type", change: func(img *image) { img.ContentType = "image/png" }, want: codes.AlreadyExists},
		{name: "different size_bytes", change: func(img *image) { img.SizeBytes++ }, want: codes.AlreadyExists},
		{name: "different width", change: func(img *image) { img.Width = 640 }, want: codes.AlreadyExists},
		{name: "different attribute value", change: func(img *image) { img.Attributes = map[string]string{"exposure": "1/500", "lens": "wide"} }, want: codes.AlreadyExists},
		{name: "attributes dropped", change: func(img *image) { img.Attributes = nil }, want: codes.AlreadyExists},
		{name: "different is_clear_day", only: "pano", change: func(img *image) { img.IsClearDay = !img.IsClearDay }, want: codes.AlreadyExists},
		{name: "different correlation id", only: "pre-stitch", change: func(img *image) { img.CorrelationID = "other" }, want: codes.AlreadyExists},
	}
	forEachKindOn(t, writePaths(), func(t *testing.T, h *harness, k kind, c kindClient) {
		want := stored(k, original)
		requireImage(t, mustCreate(t, c, original), want)
		requireIndexRow(t, h, k, "202601010002", want.RowKey, "cam-1")
		before := h.snapshot(t)
		for _, tc := range cases {
			if tc.only != "" && tc.only != k.name {
				continue
			}
			t.Run(tc.name, func(t *testing.T) {
				img := original
				img.Attributes = maps.Clone(original.Attributes)
				tc.change(&img)
				got, err := c.create(t.Context(), img)
				if tc.want == codes.OK {
					requireOK(t, err, "repeated create")
					requireImage(t, got, want)
				} else {
					requireCode(t, err, tc.want)
				}
				latest, err := c.getLatest(t.Context(), original.CameraID)
				requireOK(t, err, "get latest")
				requireImage(t, latest, want)
				h.requireSameRows(t, before)
			})
		}
	})
}

// TestConcurrentCreates races creates of one camera and instant: identical
// ones all succeed, of different ones exactly one does; either way one
// primary and one index row remain.
func TestConcurrentCreates(t *testing.T) {
	const n = 16
	forEachKindOn(t, writePaths(), func(t *testing.T, h *harness, k kind, c kindClient) {
		cases := []struct {
			name     string
			camera   string
			differ   bool
			wantWins int
		}{
			{name: "identical", camera: "cam-1", wantWins: n},
			{name: "different", camera: "cam-2", differ: true, wantWins: 1},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				imgs, got, errs := make([]image, n), make([]image, n), make([]error, n)
				var wg sync.WaitGroup
				for i := range n {
					imgs[i] = sample(tc.camera, minute(1))
					if tc.differ {
						imgs[i].BlobURI += fmt.Sprintf("?v=%d", i)
					}
					wg.Go(func() { got[i], errs[i] = c.create(t.Context(), imgs[i]) })
				}
				wg.Wait()
				wins, winner := 0, image{}
				for i, err := range errs {
					if err != nil {
						requireCode(t, err, codes.AlreadyExists)
						continue
					}
					wins++
					winner = stored(k, imgs[i])
					requireImage(t, got[i], winner)
				}
				if wins != tc.wantWins {
					t.Fatalf("%d of %d creates succeeded, want %d", wins, n, tc.wantWins)
				}
				latest, err := c.getLatest(t.Context(), tc.camera)
				requireOK(t, err, "get latest")
				requireImage(t, latest, winner)
				if rows := rowsOf(h.rows(t, k.table), tc.camera); len(rows) != 1 {
					t.Errorf("primary rows of %s: %s, want one", tc.camera, rowKeys(rows))
				}
				requireIndexRow(t, h, k, "202601010001", winner.RowKey, tc.camera)
			})
		}
	})
}

// TestSameInstantInEveryKind checks that the kinds do not share keys: one
// camera may have a single, a pano and a pre-stitch image of one instant.
func TestSameInstantInEveryKind(t *testing.T) {
	forEachServer(t, func(t *testing.T, h *harness) {
		img := sample("cam-1", minute(2))
		for _, k := range kinds {
			img.BlobURI = "https://blobs.example/" + k.name + ".jpg"
			requireImage(t, mustCreate(t, k.client(h), img), stored(k, img))
		}
		for _, k := range kinds {
			got, err := k.client(h).getLatest(t.Context(), "cam-1")
			requireOK(t, err, k.name+" get latest")
			if want := "https://blobs.example/" + k.name + ".jpg"; got.BlobURI != want {
				t.Errorf("%s image has blob_uri %q, want %q", k.name, got.BlobURI, want)
			}
		}
	})
}

// rowsOf keeps the rows of one partition.
func rowsOf(rows []store.Entity, partitionKey string) []store.Entity {
	var out []store.Entity
	for _, e := range rows {
		if e.PartitionKey == partitionKey {
			out = append(out, e)
		}
	}
	return out
}

// requireIndexRow fails unless k's index holds the row of the primary row
// (cameraID, rowKey) in partition minute, carrying DeviceId and
// MetadataRowKey and, where one transaction writes both rows (the embedded
// store), the primary row's properties but the camera and the capture
// instant, which the fleet at a moment reads from it; on Azure, exactly
// the two, as the .NET system writes it.
func requireIndexRow(t *testing.T, h *harness, k kind, minute, rowKey, cameraID string) {
	t.Helper()
	want := store.Properties{"DeviceId": cameraID, "MetadataRowKey": rowKey}
	if _, carries := h.backend.(store.Transactor); carries {
		for _, e := range rowsOf(h.rows(t, k.table), cameraID) {
			if e.RowKey == rowKey {
				maps.Copy(want, e.Properties)
				delete(want, "CameraId") // DeviceId and the keys tell these
				delete(want, "CapturedAt")
			}
		}
	}
	index := h.rows(t, k.index)
	for _, e := range index {
		if e.PartitionKey != minute || e.RowKey != rowKey+"_"+cameraID {
			continue
		}
		if !store.EqualProperties(e.Properties, want) {
			t.Errorf("index row %s/%s has properties %v, want %v", e.PartitionKey, e.RowKey, e.Properties, want)
		}
		return
	}
	t.Errorf("no index row %s/%s_%s among %s", minute, rowKey, cameraID, rowKeys(index))
}
