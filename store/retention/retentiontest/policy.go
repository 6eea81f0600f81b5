package retentiontest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention"
	"github.com/metadatad/metadatad/store/retention/policy"
)

// The policy fixture: every camera has an image at 30 minutes past the
// start of each of policyDays days, and the engine's clock starts
// policyDays days after the first, so a retention of d days expires the
// images of the first policyDays-d days for the test's first half hour.
// Every camera's image of a day lies in the same index partition, so a
// camera kept there makes the partition only partly expired. The clock runs
// ahead of the backend's, as a purge's does of old rows.
const policyDays = 5

// policyOptions returns the options of a policy fixture and its clock's start.
func policyOptions() (Options, time.Time) {
	start := time.Now()
	now := start.Add(10 * time.Minute).UTC().Truncate(time.Minute)
	o := quickOptions()
	o.Now = func() time.Time { return now.Add(time.Since(start)) }
	return o, now
}

// SeedDays creates, for each of kinds, an image per camera half an hour
// into each of the policyDays days before now, with BatchCreate as
// seedKinds does.
func (f *Fixture) SeedDays(t *testing.T, now time.Time, kinds []images.Kind, cameras ...string) {
	t.Helper()
	first := now.Add(-policy.Days(policyDays))
	for _, r := range f.Seeders(t) {
		if !slices.Contains(kinds, r.Kind()) {
			continue
		}
		var imgs []images.Image
		for _, c := range cameras {
			for d := range policyDays {
				imgs = append(imgs, images.Image{CameraID: c, CapturedAt: first.Add(policy.Days(d) + 30*time.Minute)})
			}
		}
		batchSeed(t, r, imgs)
	}
	f.LastCreate = f.Now()
	f.Settle()
}

// kept is how many of a camera's images a retention of days keeps (0:
// kept whole, as under a hold).
func kept(days int) int {
	if days == 0 {
		return policyDays
	}
	return min(days, policyDays)
}

// CheckKept checks that each camera has exactly the images its retention
// of days keeps, each with its index row, and that no index row is left
// without its primary row.
func (f *Fixture) CheckKept(t *testing.T, now time.Time, kind images.Kind, days map[string]int) {
	t.Helper()
	have := f.PrimaryRowKeys(t, kind)
	indexed := f.IndexedRowKeys(t, kind)
	for camera, d := range days {
		want := kept(d)
		if got := len(have[camera]); got != want {
			t.Errorf("%s %s: %d primary rows, want %d (retention %d days)", kind, camera, got, want, d)
		}
		cutoff := now.Add(-policy.Days(want))
		for _, rk := range have[camera] {
			c, err := store.TimeFromInvertedTicksRowKey(rk)
			if err != nil {
				t.Fatal(err)
			}
			if c.Before(cutoff) {
				t.Errorf("%s %s: kept an image of %s, before its cutoff %s", kind, camera, c, cutoff)
			}
		}
		slices.Sort(have[camera])
		slices.Sort(indexed[camera])
		if !slices.Equal(have[camera], indexed[camera]) {
			t.Errorf("%s %s: primary rows %v, index rows %v: want the same", kind, camera, have[camera], indexed[camera])
		}
	}
}

// PrimaryRowKeys lists, per camera, its primary rows' keys.
func (f *Fixture) PrimaryRowKeys(t *testing.T, kind images.Kind) map[string][]string {
	t.Helper()
	primary, _ := f.Repo(kind).Tables()
	have := map[string][]string{}
	for _, e := range rows(t, primary) {
		have[e.PartitionKey] = append(have[e.PartitionKey], e.RowKey)
	}
	return have
}

// IndexedRowKeys lists, per camera, the primary row keys its index rows
// name.
func (f *Fixture) IndexedRowKeys(t *testing.T, kind images.Kind) map[string][]string {
	t.Helper()
	indexed := map[string][]string{}
	if err := f.Repo(kind).EachIndexRow(t.Context(), store.Range{}, func(row images.IndexRow) error {
		indexed[row.CameraID] = append(indexed[row.CameraID], row.RowKey)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return indexed
}

// setPolicies sets the policies of the fixture's cameras and returns each
// camera's retention of single images, 0 for a camera on hold.
func setPolicies(t *testing.T, e *retention.Engine) map[string]int {
	t.Helper()
	p := e.Policies()
	for _, pol := range []policy.Policy{
		{Scope: policy.ScopeDefault, Days: map[images.Kind]int{images.Single: 3, images.Pano: 3}},
		{Scope: policy.ScopePrefix, Target: "acme-", Days: map[images.Kind]int{images.Single: 2}},
		{Scope: policy.ScopePrefix, Target: "acme-x-", Days: map[images.Kind]int{images.Single: 4}},
		{Scope: policy.ScopeCamera, Target: "acme-own", Days: map[images.Kind]int{images.Single: 1}},
		{Scope: policy.ScopeCamera, Target: "cam-own", Days: map[images.Kind]int{images.Single: 1}},
		{Scope: policy.ScopeCamera, Target: "cam-long", Days: map[images.Kind]int{images.Single: 4}},
	} {
		if _, err := p.CreatePolicy(t.Context(), pol); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.CreateHold(t.Context(), policy.Hold{CameraID: "held-1", Reason: "case 42"}); err != nil {
		t.Fatal(err)
	}
	return map[string]int{
		"site-a-cam1": 3, // the default
		"acme-1":      2, // a prefix
		"acme-x-1":    4, // the longest prefix
		"acme-own":    1, // its own policy before its prefix's
		"cam-own":     1,
		"cam-long":    4,
		"held-1":      0, // on hold
	}
}

func cameraNames(days map[string]int) []string {
	var out []string
	for c := range days {
		out = append(out, c)
	}
	slices.Sort(out)
	return out
}

// expired is how many images of a retention of days a purge deletes.
func expired(days map[string]int) int64 {
	var n int64
	for _, d := range days {
		n += int64(policyDays - kept(d))
	}
	return n
}

// testPurgeWithPolicies: each camera loses exactly the images its own
// policy expires (camera before the longest prefix before the default, per
// kind), a held camera nothing, and every kept image keeps its index row,
// also in the partitions every other camera's rows left; once the hold is
// released, the next purge deletes the held camera's expired images.
func testPurgeWithPolicies(t *testing.T, ts *suite) {
	ts.each(t, func(t *testing.T, open func(*testing.T, Options) *Fixture) {
		opts, now := policyOptions()
		purgeWithPolicies(t, open(t, opts), now)
	})
}

// testEmbeddedPurgeWithPoliciesInSections is TestPurgeWithPolicies on the
// embedded store in sections of one camera: held and spared cameras keep
// their index rows in the minutes every other camera's rows left, deleted
// by derived keys section after section.
func testEmbeddedPurgeWithPoliciesInSections(t *testing.T, ts *suite) {
	opts, now := policyOptions()
	opts.SectionCameras = 1
	purgeWithPolicies(t, ts.open(t, opts), now)
}

func purgeWithPolicies(t *testing.T, f *Fixture, now time.Time) {
	t.Helper()
	single := setPolicies(t, f.Engine)
	cameras := cameraNames(single)
	f.SeedDays(t, now, []images.Kind{images.Single, images.Pano, images.PreStitch}, cameras...)
	// Pano falls to the default (3 days) but for the held camera; no
	// policy sets pre-stitch images, which are kept whole.
	pano := map[string]int{}
	for c := range single {
		pano[c] = 3
	}
	pano["held-1"] = 0
	f.Run(t)

	dry := f.Purge(t, retention.StartRequest{Kinds: images.Kinds, UsePolicies: true, DryRun: true})
	j := f.Purge(t, retention.StartRequest{Kinds: images.Kinds, UsePolicies: true})
	if j.State != retention.Succeeded {
		t.Fatalf("purge ended %s: %s", j.State, j.Error)
	}
	if got := j.ImageKinds(); !slices.Equal(got, []images.Kind{images.Single, images.Pano}) {
		t.Errorf("purged kinds %v, want single and pano: no policy sets pre-stitch", got)
	}
	if want := j.Created.Add(-policy.Days(1)); !j.Cutoff.Equal(want) {
		t.Errorf("job cutoff %s, want the newest in force %s", j.Cutoff, want)
	}
	want := expired(single) + expired(pano)
	if got := j.Totals(); got.MetadataRows != want || got.IndexRows != want || got.DevicesTotal != 14 || got.DevicesDone != 12 || got.DevicesHeld != 2 {
		t.Errorf("counts %+v, want %d rows of each table, 12 cameras done and held-1 held, of each type", got, want)
	}
	if got := dry.Totals(); got != j.Totals() {
		t.Errorf("dry run counts %+v, want the purge's %+v", got, j.Totals())
	}
	f.CheckKept(t, now, images.Single, single)
	f.CheckKept(t, now, images.Pano, pano)
	all := map[string]int{}
	for c := range single {
		all[c] = 0
	}
	f.CheckKept(t, now, images.PreStitch, all)

	if err := f.Engine.Policies().DeleteHold(t.Context(), "held-1", ""); err != nil {
		t.Fatal(err)
	}
	j = f.Purge(t, retention.StartRequest{Kinds: images.Kinds, UsePolicies: true})
	released := int64(2 * (policyDays - 3))
	if got := j.Totals(); got.MetadataRows != released || got.IndexRows != released || got.DevicesDone != 2 {
		t.Errorf("after the release: counts %+v, want %d rows of each table of 2 cameras", got, released)
	}
	single["held-1"], pano["held-1"] = 3, 3
	f.CheckKept(t, now, images.Single, single)
	f.CheckKept(t, now, images.Pano, pano)
}

// testScheduleWithPolicies: a schedule with UsePolicies starts nothing
// while no policy is set, then purges each camera by its policy.
func testScheduleWithPolicies(t *testing.T, ts *suite) {
	opts, now := policyOptions()
	var skipped atomic.Int64
	opts.Logger = slog.New(messageCounter{word: "no retention policy", n: &skipped})
	f := ts.open(t, opts)
	f.SeedDays(t, now, []images.Kind{images.Single}, "cam-a", "cam-b")
	f.Run(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.Engine.RunSchedule(ctx, retention.Schedule{UsePolicies: true, Interval: 20 * time.Millisecond})
	}()
	defer func() {
		cancel()
		<-done
	}()
	deadline := time.After(patience)
	for skipped.Load() < 2 {
		select {
		case <-time.After(5 * time.Millisecond):
		case <-deadline:
			t.Fatal("the schedule never said it had no policy to apply")
		}
	}
	if jobs, _, err := f.Engine.List(t.Context(), 10, nil); err != nil || len(jobs) != 0 {
		t.Fatalf("jobs %v (%v) without a policy, want none", jobs, err)
	}
	if _, err := f.Engine.Policies().CreatePolicy(t.Context(), policy.Policy{Scope: policy.ScopeDefault,
		Days: map[images.Kind]int{images.Single: 3}}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Engine.Policies().CreatePolicy(t.Context(), policy.Policy{Scope: policy.ScopeCamera, Target: "cam-b",
		Days: map[images.Kind]int{images.Single: 1}}); err != nil {
		t.Fatal(err)
	}
	for {
		jobs, _, err := f.Engine.List(t.Context(), 10, nil)
		if err != nil {
			t.Fatal(err)
		}
		if i := slices.IndexFunc(jobs, func(j *retention.Job) bool { return j.State == retention.Succeeded }); i >= 0 {
			if !jobs[i].UsePolicies {
				t.Fatalf("scheduled job %+v does not use the policies", jobs[i])
			}
			break
		}
		select {
		case <-f.Engine.Changed():
		case <-time.After(10 * time.Millisecond):
		case <-deadline:
			t.Fatalf("after %v: no scheduled purge with policies succeeded", patience)
		}
	}
	f.CheckKept(t, now, images.Single, map[string]int{"cam-a": 3, "cam-b": 1})
}

// testPrefixPolicyBound: the prefix policies a purge holds in memory are
// bounded: one more than MaxPrefixPolicies is refused, by a create or an
// update that would create it; camera policies are not bounded by it.
func testPrefixPolicyBound(t *testing.T, ts *suite) {
	f := ts.open(t, quickOptions())
	p := f.Engine.Policies()
	days := map[images.Kind]int{images.Single: 30}
	g, ctx := errgroup.WithContext(t.Context())
	g.SetLimit(16)
	for i := range retention.MaxPrefixPolicies {
		g.Go(func() error {
			_, err := p.CreatePolicy(ctx, policy.Policy{Scope: policy.ScopePrefix, Target: fmt.Sprintf("site-%05d-", i), Days: days})
			return err
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	_, err := p.CreatePolicy(t.Context(), policy.Policy{Scope: policy.ScopePrefix, Target: "one-more-", Days: days})
	if !errors.Is(err, retention.ErrTooManyPrefixes) {
		t.Errorf("create of prefix %d: %v, want ErrTooManyPrefixes", retention.MaxPrefixPolicies+1, err)
	}
	_, err = p.UpdatePolicy(t.Context(), retention.PolicyUpdate{Policy: policy.Policy{Scope: policy.ScopePrefix, Target: "one-more-", Days: days},
		Kinds: []images.Kind{images.Single}, AllowMissing: true})
	if !errors.Is(err, retention.ErrTooManyPrefixes) {
		t.Errorf("update creating prefix %d: %v, want ErrTooManyPrefixes", retention.MaxPrefixPolicies+1, err)
	}
	if _, err := p.UpdatePolicy(t.Context(), retention.PolicyUpdate{Policy: policy.Policy{Scope: policy.ScopePrefix, Target: "site-00001-",
		Days: map[images.Kind]int{images.Single: 40}}, Kinds: []images.Kind{images.Single}}); err != nil {
		t.Errorf("update of an existing prefix at the bound: %v", err)
	}
	if _, err := p.CreatePolicy(t.Context(), policy.Policy{Scope: policy.ScopeCamera, Target: "cam-1", Days: days}); err != nil {
		t.Errorf("camera policy at the prefix bound: %v", err)
	}
}

// testCrashAtAnyWriteWithPoliciesResumesExactly: a purge with policies
// whose store dies after any of its writes resumes after a restart and
// ends with exact counts, each camera left exactly the images its policy
// keeps, each with its index row, the held camera untouched.
func testCrashAtAnyWriteWithPoliciesResumesExactly(t *testing.T, ts *suite) {
	t.Parallel() // independent: stores and engines of its own
	ts.each(t, func(t *testing.T, newFixture func(*testing.T, Options) *Fixture) {
		crashAtEveryWrite(t, ts, crashWithPoliciesAndResume)
	})
}

func crashWithPoliciesAndResume(t *testing.T, newFixture func(*testing.T, Options) *Fixture, n int) bool {
	opts, now := policyOptions()
	opts.GroupSize = 1 // a task per camera: more writes to crash at
	f := newFixture(t, opts)
	p := f.Engine.Policies()
	for _, pol := range []policy.Policy{
		{Scope: policy.ScopeDefault, Days: map[images.Kind]int{images.Single: 3}},
		{Scope: policy.ScopePrefix, Target: "cam-", Days: map[images.Kind]int{images.Single: 2}},
		{Scope: policy.ScopeCamera, Target: "cam-own", Days: map[images.Kind]int{images.Single: 1}},
	} {
		if _, err := p.CreatePolicy(t.Context(), pol); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.CreateHold(t.Context(), policy.Hold{CameraID: "cam-held"}); err != nil {
		t.Fatal(err)
	}
	days := map[string]int{"site-1": 3, "cam-own": 1, "cam-held": 0}
	for _, c := range []string{"cam-a", "cam-b", "cam-c", "cam-d", "cam-e"} {
		days[c] = 2
	}
	f.SeedDays(t, now, []images.Kind{images.Single}, cameraNames(days)...)
	c := f.StartCrashing(t, n, nil, retention.StartRequest{Kinds: []images.Kind{images.Single}, UsePolicies: true})
	restarted, dead, jobs := c.restarted, c.dead, c.jobs
	if len(jobs) == 0 || (c.startErr != nil && jobs[0].Unconfirmed) {
		if !dead {
			t.Fatalf("no job or no start (%v), and no crash", c.startErr)
		}
		all := map[string]int{}
		for c := range days {
			all[c] = 0
		}
		restarted.CheckKept(t, now, images.Single, all)
		return dead
	}
	if dead {
		restarted.Run(t)
	}
	j := restarted.Await(t, jobs[0].ID)
	if j.State != retention.Succeeded {
		t.Fatalf("resumed job: %s (%s)", j.State, j.Error)
	}
	want := expired(days)
	if got := j.Totals(); got.MetadataRows != want || got.IndexRows != want || got.DevicesDone != 7 || got.DevicesHeld != 1 || got.DevicesTotal != 8 {
		t.Errorf("resumed job counts %+v, want %d rows of each table, 7 cameras done and cam-held held", got, want)
	}
	restarted.CheckKept(t, now, images.Single, days)
	return dead
}
