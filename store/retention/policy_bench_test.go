package retention_test

import (
	"fmt"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention"
	"github.com/metadatad/metadatad/store/retention/policy"
)

// Sizes of BenchmarkPurgeWithPolicies: the expired volume is the same in
// every case, the cameras spared by their own policy differ.
const (
	policyBenchExpired = 20_000
	policyBenchCameras = 100
)

// BenchmarkPurgeWithPolicies purges, with policies, the same expired volume
// (policyBenchExpired images of policyBenchCameras cameras under the
// default's 7 days) beside few and many cameras that their own policy (60
// days) spares, each with an image as old as the expired ones: in the
// range the index scan reads. A spared camera costs its index key and the
// policy check (a read of its own policy; its hold is read only for a
// camera its policy would purge), never primary-table work; the cost per
// expired row, and its ratio to the case with the fewest spared cameras,
// measured in the same run, show what that check weighs. primary-ops is
// the purge's operations on the primary table, which the expired cameras
// alone account for, so it is the same in every case; an operation on a
// spared camera's primary rows fails the benchmark. The spared images lie
// in the expired images' minutes ("mixed"), where each makes its partition
// only partly expired, so that the purge deletes the partition's expired
// index rows by key rather than in one range deletion; or in minutes of
// their own ("apart").
func BenchmarkPurgeWithPolicies(b *testing.B) {
	type layout struct {
		spared int
		mixed  bool
	}
	cases := []layout{{100, true}, {10_000, true}, {10_000, false}}
	elapsed := make([]time.Duration, len(cases))
	primaryOps := make([]int64, len(cases))
	for range b.N {
		for i, c := range cases {
			took, ops := policyPurge(b, c.spared, c.mixed)
			elapsed[i] += took
			primaryOps[i] += ops
		}
	}
	for i, c := range cases {
		name := fmt.Sprintf("spared=%d", c.spared)
		if !c.mixed {
			name += "-apart"
		}
		b.ReportMetric(float64(elapsed[i].Nanoseconds())/float64(b.N*policyBenchExpired), "ns/expired-row-"+name)
		b.ReportMetric(float64(primaryOps[i])/float64(b.N), "primary-ops-"+name)
		if i > 0 {
			b.ReportMetric(float64(elapsed[i])/float64(elapsed[0]), "ratio-"+name)
		}
	}
}

// sparedPrefix starts the ids of the cameras their own policy spares.
const sparedPrefix = "keep-"

// policyPurge seeds a new store and times one purge with policies; it
// returns the time and the purge's primary-table operations, and fails if
// any of them is on a spared camera.
func policyPurge(b *testing.B, spared int, mixed bool) (time.Duration, int64) {
	b.StopTimer()
	defer b.StartTimer()
	ops := &opCounter{watch: sparedPrefix}
	s := openBenchStore(b, func(backend store.Backend) store.Backend {
		return &countingBackend{Backend: backend, only: images.Single.DefaultTable(), c: ops}
	})
	defer s.close()
	now := time.Now().UTC()
	policies := s.engine.Policies()
	if _, err := policies.CreatePolicy(b.Context(), policy.Policy{Scope: policy.ScopeDefault,
		Days: map[images.Kind]int{images.Single: int(benchRetention / policy.Days(1))}}); err != nil {
		b.Fatal(err)
	}
	keep := func(c int) string { return fmt.Sprintf("%s%05d", sparedPrefix, c) }
	s.clock.lag.Store(int64(benchAge))
	step := benchSpan / time.Duration(policyBenchExpired)
	g, ctx := errgroup.WithContext(b.Context())
	g.SetLimit(benchSeeders)
	for i := range policyBenchExpired {
		g.Go(func() error {
			_, err := s.repo.Create(ctx, upload(expiredCamera(i%policyBenchCameras), now.Add(-benchAge+time.Duration(i)*step)))
			return err
		})
	}
	for c := range spared {
		g.Go(func() error {
			if _, err := policies.CreatePolicy(ctx, policy.Policy{Scope: policy.ScopeCamera, Target: keep(c),
				Days: map[images.Kind]int{images.Single: 60}}); err != nil {
				return err
			}
			at := now.Add(-benchAge + time.Duration(c)*benchSpan/time.Duration(spared))
			if !mixed {
				at = at.Add(-benchSpan) // the minutes before the expired images'
			}
			_, err := s.repo.Create(ctx, upload(keep(c), at))
			return err
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatalf("seeding: %v", err)
	}
	s.clock.lag.Store(0)
	ops.reset()
	s.run(b)

	start := time.Now()
	b.StartTimer()
	j, err := s.engine.Start(b.Context(), retention.StartRequest{Kinds: []images.Kind{images.Single}, UsePolicies: true})
	if err != nil {
		b.Fatal(err)
	}
	j = s.await(b, j.ID)
	took := time.Since(start)
	b.StopTimer()

	want := retention.Counts{DevicesTotal: policyBenchCameras, DevicesDone: policyBenchCameras,
		MetadataRows: policyBenchExpired, IndexRows: policyBenchExpired}
	if j.State != retention.Succeeded || j.Totals() != want {
		b.Fatalf("purge %s (%s): %+v, want %+v", j.State, j.Error, j.Totals(), want)
	}
	primary, index := s.repo.Tables()
	for _, t := range []store.Table{primary, index} {
		if n := countAll(b, t); n != spared {
			b.Fatalf("%s holds %d rows after the purge, want the %d spared cameras'", t.Name(), n, spared)
		}
	}
	if n := ops.watchedOps.Load(); n != 0 {
		b.Fatalf("the purge made %d primary-table operations on spared cameras, want none", n)
	}
	return took, ops.reads.Load() + ops.writes.Load()
}
