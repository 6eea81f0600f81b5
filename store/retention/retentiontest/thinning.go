package retentiontest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention"
	"github.com/metadatad/metadatad/store/retention/policy"
)

// The thinning fixture: cameras with an image every 20 minutes in the
// windows of thinWindows, between 6 days before the engine's clock and 1
// day before it; the clock starts 7 minutes past an hour, so no interval
// boundary of its tiers moves while a test runs.
const thinEvery = 20 * time.Minute

// thinWindows are the ages, in hours, around which the fixture has images:
// 4 hours across each age where a rule of setUpThinning changes (2 days,
// where the tiers begin; 3, cam-plain's retention; 4, where the single
// images' tiers change; 5, the panos' retention), and 2 hours at each end
// (kept whole at 1 day; at 6, thinned to one per 2 hours, and past every
// retention). Each window holds intervals of every tier on each side of
// its age, so every rule and its edges are met with a sixth of the images
// of the 5 days (the images between the windows only met the same rules
// again, and made each purge and each crash point six times the work).
var thinWindows = []struct{ from, to int }{{24, 26}, {46, 50}, {70, 74}, {94, 98}, {118, 122}, {142, 144}}

// inThinWindow reports whether an image captured at is in a window of
// thinWindows, seen from now.
func inThinWindow(now, at time.Time) bool {
	age := now.Sub(at)
	return slices.ContainsFunc(thinWindows, func(w struct{ from, to int }) bool {
		return age >= time.Duration(w.from)*time.Hour && age < time.Duration(w.to)*time.Hour
	})
}

func thinOptions() (Options, time.Time) {
	start := time.Now()
	now := start.UTC().Truncate(24 * time.Hour).Add(-12*time.Hour + 7*time.Minute)
	o := quickOptions()
	o.Now = func() time.Time { return now.Add(time.Since(start)) }
	return o, now
}

// SeedThinning creates the fixture's images of kind for cameras; a pano
// is clear-day at 20 minutes past each hour. It writes them with
// BatchCreate, as seedKinds does.
func (f *Fixture) SeedThinning(t *testing.T, now time.Time, kind images.Kind, cameras ...string) {
	t.Helper()
	r := f.Seeders(t)[kind-1]
	var imgs []images.Image
	for _, c := range cameras {
		for at := now.Add(-policy.Days(6)).Truncate(thinEvery); at.Before(now.Add(-policy.Days(1))); at = at.Add(thinEvery) {
			if inThinWindow(now, at) {
				imgs = append(imgs, images.Image{CameraID: c, CapturedAt: at, IsClearDay: kind == images.Pano && at.Minute() == 20, BlobURI: thinBlob(kind, c, at)})
			}
		}
	}
	batchSeed(t, r, imgs)
	f.LastCreate = f.Now()
	f.Settle()
}

// thinBlob is the blob URI the fixture gives an image.
func thinBlob(kind images.Kind, camera string, at time.Time) string {
	return fmt.Sprintf("https://blobs.example/%s/%s/%d.jpg", kind, camera, at.Unix())
}

// wantThinned is the model of a kind's rule, from its definition: an image
// older than days goes; an image in an interval of a tier that lies wholly
// inside the tier's ages is kept only if it is its interval's keeper (the
// earliest, or the earliest that prefer picks when one does).
func wantThinned(now time.Time, days int, tiers []policy.Tier, captured []time.Time, prefer func(time.Time) bool) []time.Time {
	var out []time.Time
	keeper := map[string]time.Time{}
	tierOf := func(c time.Time) (string, bool) {
		for i, t := range tiers {
			until := t.UntilDays
			if until == 0 {
				until = days
			}
			start := c.Truncate(t.KeepOnePer)
			if start.Add(t.KeepOnePer).After(now.Add(-policy.Days(t.AfterDays))) {
				continue
			}
			if until > 0 && start.Before(now.Add(-policy.Days(until))) {
				continue
			}
			return fmt.Sprint(i, start), true
		}
		return "", false
	}
	sorted := slices.Clone(captured)
	slices.SortFunc(sorted, time.Time.Compare)
	for _, c := range sorted {
		if k, ok := tierOf(c); ok {
			if cur, seen := keeper[k]; !seen || (prefer != nil && prefer(c) && !prefer(cur)) {
				keeper[k] = c
			}
		}
	}
	for _, c := range sorted {
		if days > 0 && c.Before(now.Add(-policy.Days(days)).Truncate(time.Minute)) {
			continue
		}
		if k, ok := tierOf(c); ok && !keeper[k].Equal(c) {
			continue
		}
		out = append(out, c)
	}
	return out
}

// CapturedOf lists each camera's primary rows' capture times, oldest first,
// and checks that the index holds exactly one row for each.
func (f *Fixture) CapturedOf(t *testing.T, kind images.Kind) map[string][]time.Time {
	t.Helper()
	primary, _ := f.Repo(kind).Tables()
	out := map[string][]time.Time{}
	keys := map[string][]string{}
	for _, e := range rows(t, primary) {
		out[e.PartitionKey] = append(out[e.PartitionKey], captured(t, e))
		keys[e.PartitionKey] = append(keys[e.PartitionKey], e.RowKey)
	}
	indexed := f.IndexedRowKeys(t, kind)
	for c := range out {
		slices.SortFunc(out[c], time.Time.Compare)
		slices.Sort(keys[c])
		slices.Sort(indexed[c])
		if !slices.Equal(keys[c], indexed[c]) {
			t.Errorf("%s %s: %d primary rows, %d index rows: want one index row each", kind, c, len(keys[c]), len(indexed[c]))
		}
	}
	for c := range indexed {
		if _, ok := out[c]; !ok {
			t.Errorf("%s %s: %d index rows without primary rows", kind, c, len(indexed[c]))
		}
	}
	return out
}

// testThinningKeepsOnePerInterval: a purge with policies thins each
// camera's images as its tiers say, with age retention in the same job; the
// counts are exact, a dry run counts the same beforehand, a hold spares its
// camera, and a second pass deletes nothing.
func testThinningKeepsOnePerInterval(t *testing.T, ts *suite) {
	t.Parallel() // independent: stores and engines of its own
	ts.each(t, func(t *testing.T, open func(*testing.T, Options) *Fixture) {
		testThinning(t, open, 0)
	})
	if ts.h.mode() == pebbleMode {
		t.Run("a section per camera", func(t *testing.T) { testThinning(t, ts.open, 1) })
	}
}

// thinScenario is the fixture's policies, hold and images, and what the
// model says a purge with policies leaves of them.
type thinScenario struct {
	now    time.Time
	before map[images.Kind]map[string][]time.Time
	rules  map[images.Kind]map[string]thinRule
	want   map[images.Kind]retention.Counts
}

type thinRule struct {
	days   int
	tiers  []policy.Tier
	prefer func(time.Time) bool
}

var thinKinds = []images.Kind{images.Single, images.Pano}

// setUpThinning gives f the default policy (single images thinned in two
// tiers and kept for ever, panos kept 5 days and thinned to their first
// clear-day image per hour after 2), a camera on age retention alone, a
// held camera, and their images.
func setUpThinning(t *testing.T, f *Fixture, now time.Time) *thinScenario {
	t.Helper()
	singleTiers := []policy.Tier{{AfterDays: 2, KeepOnePer: 30 * time.Minute, UntilDays: 4}, {AfterDays: 4, KeepOnePer: 2 * time.Hour}}
	panoTiers := []policy.Tier{{AfterDays: 2, KeepOnePer: time.Hour}}
	p := f.Engine.Policies()
	for _, pol := range []policy.Policy{
		{Scope: policy.ScopeDefault, Days: map[images.Kind]int{images.Pano: 5},
			Tiers: map[images.Kind][]policy.Tier{images.Single: singleTiers, images.Pano: panoTiers}},
		{Scope: policy.ScopeCamera, Target: "cam-plain", Days: map[images.Kind]int{images.Single: 3}},
	} {
		if _, err := p.CreatePolicy(t.Context(), pol); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.CreateHold(t.Context(), policy.Hold{CameraID: "held-1", Reason: "case 7"}); err != nil {
		t.Fatal(err)
	}
	f.SeedThinning(t, now, images.Single, "cam-a", "cam-b", "cam-plain", "held-1")
	f.SeedThinning(t, now, images.Pano, "cam-a", "held-1")
	sc := &thinScenario{now: now, before: map[images.Kind]map[string][]time.Time{
		images.Single: f.CapturedOf(t, images.Single), images.Pano: f.CapturedOf(t, images.Pano)}}
	clearDay := func(c time.Time) bool { return c.Minute() == 20 }
	sc.rules = map[images.Kind]map[string]thinRule{
		images.Single: {"cam-a": {0, singleTiers, nil}, "cam-b": {0, singleTiers, nil}, "cam-plain": {3, nil, nil}},
		images.Pano:   {"cam-a": {5, panoTiers, clearDay}},
	}
	// The counts the model gives: every image gone, and of them those the
	// tiers take beyond what age alone would.
	sc.want = map[images.Kind]retention.Counts{}
	for kind, cams := range sc.rules {
		c := sc.want[kind]
		for cam, r := range cams {
			all := sc.before[kind][cam]
			gone := int64(len(all) - len(wantThinned(now, r.days, r.tiers, all, r.prefer)))
			c.MetadataRows += gone
			c.IndexRows += gone
			c.ThinnedRows += int64(len(wantThinned(now, r.days, nil, all, nil)) - len(wantThinned(now, r.days, r.tiers, all, r.prefer)))
			c.DevicesTotal++
			c.DevicesDone++
		}
		// held-1, which the tiers would thin, is counted held.
		c.DevicesTotal++
		c.DevicesHeld++
		sc.want[kind] = c
	}
	if sc.want[images.Single].ThinnedRows < 40 || sc.want[images.Pano].MetadataRows <= sc.want[images.Pano].ThinnedRows {
		t.Fatalf("the fixture thins too little to test: %+v", sc.want)
	}
	return sc
}

// deleted is how many images the model says a purge with policies deletes.
func (sc *thinScenario) deleted() int64 {
	return sc.want[images.Single].MetadataRows + sc.want[images.Pano].MetadataRows
}

// checkCounts checks a job's counts against the model's. lowerBoundOK
// allows the queue design's flag, which a crash or a redelivery raises (a
// task slower than its visibility timeout on a loaded machine): its counts
// stay exact, the flag says they might not be (Counts.MetadataRowsLowerBound).
// The embedded purge's counts are exact by construction, flag and all.
func (sc *thinScenario) checkCounts(t *testing.T, j *retention.Job, lowerBoundOK bool) {
	t.Helper()
	if j.State != retention.Succeeded {
		t.Fatalf("job %s: %s (%s)", j.ID, j.State, j.Error)
	}
	for _, kind := range thinKinds {
		got := countsOf(j, kind)
		if lowerBoundOK {
			got.MetadataRowsLowerBound = false
		}
		if got != sc.want[kind] {
			t.Errorf("dry run %v, %s: counts %+v, want %+v", j.DryRun, kind, got, sc.want[kind])
		}
	}
}

// checkKept checks that every camera keeps exactly what the model says,
// each image with its index row, and the held camera everything.
func (sc *thinScenario) checkKept(t *testing.T, f *Fixture) {
	t.Helper()
	for kind, cams := range sc.rules {
		after := f.CapturedOf(t, kind)
		for cam, r := range cams {
			if w := wantThinned(sc.now, r.days, r.tiers, sc.before[kind][cam], r.prefer); !slices.EqualFunc(after[cam], w, time.Time.Equal) {
				t.Errorf("%s %s: kept %d images, want %d: %v", kind, cam, len(after[cam]), len(w), diffTimes(after[cam], w))
			}
		}
		if !slices.EqualFunc(after["held-1"], sc.before[kind]["held-1"], time.Time.Equal) {
			t.Errorf("%s held-1: %d images after the purge, %d Before: a hold spares everything", kind, len(after["held-1"]), len(sc.before[kind]["held-1"]))
		}
	}
}

func testThinning(t *testing.T, open func(*testing.T, Options) *Fixture, sectionCameras int) {
	o, now := thinOptions()
	o.SectionCameras = sectionCameras
	f := open(t, o)
	f.Run(t)
	sc := setUpThinning(t, f, now)
	dry := f.Purge(t, retention.StartRequest{Kinds: thinKinds, UsePolicies: true, DryRun: true})
	sc.checkCounts(t, dry, false)
	sc.checkCounts(t, f.Purge(t, retention.StartRequest{Kinds: thinKinds, UsePolicies: true}), f.QueueDesign())
	sc.checkKept(t, f)
	again := f.Purge(t, retention.StartRequest{Kinds: thinKinds, UsePolicies: true})
	if got := again.Totals(); got.MetadataRows != 0 || got.IndexRows != 0 {
		t.Errorf("a second pass deleted %+v: want nothing", got)
	}
}

// testThinningTakesALateImage: an image created late in an interval
// already thinned goes at the next pass, counted, and the keeper stays.
func testThinningTakesALateImage(t *testing.T, ts *suite) {
	t.Parallel() // independent: stores and engines of its own
	ts.each(t, thinningTakesALateImage)
}

func thinningTakesALateImage(t *testing.T, open func(*testing.T, Options) *Fixture) {
	o, now := thinOptions()
	f := open(t, o)
	f.Run(t)
	tiers := []policy.Tier{{AfterDays: 2, KeepOnePer: time.Hour}}
	if _, err := f.Engine.Policies().CreatePolicy(t.Context(), policy.Policy{Scope: policy.ScopeDefault,
		Tiers: map[images.Kind][]policy.Tier{images.Single: tiers}}); err != nil {
		t.Fatal(err)
	}
	f.SeedThinning(t, now, images.Single, "cam-a")
	first := f.Purge(t, retention.StartRequest{Kinds: []images.Kind{images.Single}, UsePolicies: true})
	if first.Totals().ThinnedRows == 0 {
		t.Fatalf("the first pass thinned nothing: %+v", first.Totals())
	}
	thinned := f.CapturedOf(t, images.Single)["cam-a"]
	hour := now.Add(-policy.Days(3)).Truncate(time.Hour)
	if !slices.ContainsFunc(thinned, hour.Equal) {
		t.Fatalf("the hour %s kept no image at its start: %v", hour, thinned)
	}
	if _, err := f.Seeders(t)[0].Create(t.Context(), images.Image{CameraID: "cam-a", CapturedAt: hour.Add(5 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	f.LastCreate = f.Now()
	f.Settle()
	j := f.Purge(t, retention.StartRequest{Kinds: []images.Kind{images.Single}, UsePolicies: true})
	if got := j.Totals(); got.MetadataRows != 1 || got.ThinnedRows != 1 || got.IndexRows != 1 {
		t.Errorf("the pass after a late image deleted %+v: want that one image", got)
	}
	if after := f.CapturedOf(t, images.Single)["cam-a"]; !slices.EqualFunc(after, thinned, time.Time.Equal) {
		t.Errorf("kept %s; want what the first pass kept", diffTimes(after, thinned))
	}
}

func countsOf(j *retention.Job, kind images.Kind) retention.Counts {
	for _, k := range j.Kinds {
		if k.Kind == kind {
			return k.Counts
		}
	}
	return retention.Counts{}
}

// diffTimes says what got has that want has not, and the reverse, briefly.
func diffTimes(got, want []time.Time) string {
	var extra, missing []time.Time
	for _, g := range got {
		if !slices.ContainsFunc(want, g.Equal) {
			extra = append(extra, g)
		}
	}
	for _, w := range want {
		if !slices.ContainsFunc(got, w.Equal) {
			missing = append(missing, w)
		}
	}
	return fmt.Sprintf("extra %v, missing %v", extra[:min(len(extra), 4)], missing[:min(len(missing), 4)])
}
