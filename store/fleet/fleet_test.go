package fleet_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/fleet"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// TestCamerasFirstAndLatestExact lists the cameras of a prefix, a page at
// a time, each with the exact captures of its oldest and newest image,
// and, on the embedded store, its images per day.
func TestCamerasFirstAndLatestExact(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			h := b.open(t, t0)
			// Out of order, as a backlog would come, and to the second.
			h.create(t, "cam-b", t0.Add(-90*time.Second), t0.Add(-49*time.Hour+7*time.Second), t0.Add(-3*time.Second))
			h.create(t, "cam-a", t0.Add(-time.Hour+1500*time.Millisecond))
			h.create(t, "other", t0)
			h.settle(t)
			want := []fleet.Camera{
				{ID: "cam-a", First: t0.Add(-time.Hour + 1500*time.Millisecond), Latest: t0.Add(-time.Hour + 1500*time.Millisecond)},
				{ID: "cam-b", First: t0.Add(-49*time.Hour + 7*time.Second), Latest: t0.Add(-3 * time.Second)},
			}
			var got []fleet.Camera
			after := ""
			for page := 0; ; page++ {
				cams, next, err := h.view.Cameras(t.Context(), fleet.CameraQuery{Prefix: "cam-", After: after, Limit: 1})
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, cams...)
				if next == "" {
					break
				}
				if page > 3 {
					t.Fatal("paging does not end")
				}
				after = next
			}
			if !slices.EqualFunc(got, want, sameCamera) {
				t.Fatalf("cameras = %v, want %v", got, want)
			}
			day := t0.Truncate(24 * time.Hour)
			cams, _, err := h.view.Cameras(t.Context(), fleet.CameraQuery{Prefix: "cam-b", Limit: 10, DaysFrom: day.Add(-48 * time.Hour), DaysTo: day.Add(24 * time.Hour)})
			if b.name == "azure" {
				if !errors.Is(err, fleet.ErrNoDailyCounts) {
					t.Fatalf("images per day on Azure: %v, want ErrNoDailyCounts", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			wantDays := []fleet.DayCount{{Day: day.Add(-48 * time.Hour), Images: 1}, {Day: day, Images: 2}}
			if len(cams) != 1 || !slices.Equal(cams[0].Days, wantDays) {
				t.Fatalf("days = %v, want %v", cams, wantDays)
			}
		})
	}
}

func sameCamera(a, b fleet.Camera) bool {
	return a.ID == b.ID && a.First.Equal(b.First) && a.Latest.Equal(b.Latest)
}

// TestSilentCameraFoundAndRevivedGone finds the camera that stopped
// sending, leaves out the one that sends and the one retired before the
// look-back, and drops the silent one once it sends again.
func TestSilentCameraFoundAndRevivedGone(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			h := b.open(t, t0)
			h.create(t, "quiet", t0.Add(-2*time.Hour), t0.Add(-30*time.Minute))
			h.create(t, "busy", t0.Add(-30*time.Minute), t0.Add(-time.Minute))
			h.create(t, "retired", t0.Add(-10*24*time.Hour))
			h.settle(t)
			q := fleet.SilentQuery{Limit: 100, SilentFor: 15 * time.Minute, LookBack: 7 * 24 * time.Hour}
			silentIDs := func() []string {
				t.Helper()
				cams, next, _, err := h.view.Silent(t.Context(), q)
				if err != nil || next != "" {
					t.Fatalf("Silent: next %q, %v", next, err)
				}
				var ids []string
				for _, c := range cams {
					ids = append(ids, c.ID)
				}
				n, err := h.view.CountSilent(t.Context(), q.SilentFor, q.LookBack)
				if err != nil || n != len(ids) {
					t.Fatalf("CountSilent = %d, %v; the list has %d", n, err, len(ids))
				}
				return ids
			}
			if got := silentIDs(); !slices.Equal(got, []string{"quiet"}) {
				t.Fatalf("silent = %v, want [quiet]", got)
			}
			// The camera sends again, after the recorder's interval on Azure.
			h.clock.add(fleet.DefaultInterval)
			h.create(t, "quiet", h.clock.now())
			if got := silentIDs(); len(got) != 0 {
				t.Fatalf("silent after it sent again = %v, want none", got)
			}
		})
	}
}

// TestCoverageGapsExact finds, over a range across midnight, the spans
// without an image longer than the expected interval, and the share of
// the range they leave.
func TestCoverageGapsExact(t *testing.T) {
	start := time.Date(2026, 3, 1, 22, 0, 0, 0, time.UTC)
	end := start.Add(4 * time.Hour) // 240 minutes
	var at []time.Time
	for _, m := range every(start, end, time.Minute) {
		off := m.Sub(start)
		switch {
		case off < 10*time.Minute: // nothing before 22:10
		case off >= 100*time.Minute && off < 110*time.Minute: // 10 minutes lost
		case off >= 119*time.Minute && off < 123*time.Minute: // 4 lost across midnight
		default:
			at = append(at, m.Add(17*time.Second))
		}
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			h := b.open(t, end)
			h.batch(t, "cam", at)
			h.create(t, "cam", start.Add(-time.Minute), end) // outside the range
			h.create(t, "cam2", start.Add(100*time.Minute))  // another camera
			for _, c := range []struct {
				name   string
				every  time.Duration
				gaps   []fleet.Gap
				images int64
			}{
				{"every minute", time.Minute, []fleet.Gap{
					{start, start.Add(10 * time.Minute)},
					{start.Add(100 * time.Minute), start.Add(110 * time.Minute)},
					{start.Add(119 * time.Minute), start.Add(123 * time.Minute)},
				}, int64(len(at))},
				{"every 5 minutes", 5 * time.Minute, []fleet.Gap{
					{start, start.Add(10 * time.Minute)},
					{start.Add(100 * time.Minute), start.Add(110 * time.Minute)},
				}, int64(len(at))},
				{"every 11 minutes", 11 * time.Minute, nil, int64(len(at))},
			} {
				t.Run(c.name, func(t *testing.T) {
					got, err := h.view.Coverage(t.Context(), "cam", start, end, c.every)
					if err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(got.Gaps, c.gaps) || got.Images != c.images {
						t.Fatalf("coverage = %v gaps, %d images; want %v, %d", got.Gaps, got.Images, c.gaps, c.images)
					}
					missed := 0
					for _, g := range c.gaps {
						missed += int(g.End.Sub(g.Start) / time.Minute)
					}
					if want := 1 - float64(missed)/240; got.Covered != want {
						t.Fatalf("covered = %v, want %v", got.Covered, want)
					}
				})
			}
		})
	}
}

// TestMomentReadsTheWindow pages through the images of every camera in a
// window, and nothing outside it.
func TestMomentReadsTheWindow(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			h := b.open(t, t0)
			start, end := t0.Add(30*time.Second), t0.Add(3*time.Minute+30*time.Second)
			want := map[string]bool{}
			for _, cam := range []string{"c1", "c2", "c3"} {
				for _, at := range every(t0.Add(-time.Minute), t0.Add(5*time.Minute), 30*time.Second) {
					h.create(t, cam, at)
					if !at.Before(start) && at.Before(end) {
						want[cam+"@"+at.Format(time.RFC3339)] = true
					}
				}
			}
			got := map[string]bool{}
			var resume *store.Cursor
			for pages := 0; ; pages++ {
				imgs, next, err := h.view.Moment(t.Context(), start, end, 4, resume)
				if err != nil {
					t.Fatal(err)
				}
				for _, img := range imgs {
					key := img.CameraID + "@" + img.CapturedAt.UTC().Format(time.RFC3339)
					if got[key] {
						t.Fatalf("%s listed twice", key)
					}
					got[key] = true
				}
				if next == nil {
					break
				}
				if pages > 20 {
					t.Fatal("paging does not end")
				}
				resume = next
			}
			if len(got) != len(want) || len(want) != 18 {
				t.Fatalf("listed %d images, want %d", len(got), len(want))
			}
			for k := range want {
				if !got[k] {
					t.Fatalf("%s missing", k)
				}
			}
			if _, _, err := h.view.Moment(t.Context(), t0, t0.Add(fleet.MaxWindow+time.Second), 10, nil); err == nil {
				t.Fatal("a window past MaxWindow was read")
			}
		})
	}
}
