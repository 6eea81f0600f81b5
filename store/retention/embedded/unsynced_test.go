package embedded_test

import (
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention"
	"github.com/metadatad/metadatad/store/retention/embedded"
)

// TestASectionLostInACrashRunsAgain: a section commits without a sync of
// its own, so a crash may lose it whole: the restarted store has its rows
// and its job's record as before it, and the resumed job deletes and counts
// them exactly. With the outbox on, sections are synced, since the blob
// deleter may act on their records at once: a crash keeps every section
// whose records could have been read.
func TestASectionLostInACrashRunsAgain(t *testing.T) {
	for _, outbox := range []bool{false, true} {
		t.Run(map[bool]string{false: "no outbox", true: "outbox"}[outbox], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var live atomic.Bool
				live.Store(true) // many sections
				fs := vfs.NewCrashableMem()
				s := pacedStore{opts: embedded.Options{SectionTime: 4 * time.Millisecond, LiveShare: 0.5}, live: &live,
					cost: func(string) time.Duration { return time.Millisecond }, fs: fs, outbox: outbox}
				f := openPacedFixture(t, s)
				seedPaced(t, f)
				const crashAfter = 3
				crashed := make(chan *vfs.MemFS, 1)
				f.purger.committed = func(n int) {
					if n == crashAfter {
						crashed <- fs.CrashClone(vfs.CrashCloneCfg{})
					}
				}
				f.run(t)
				j, err := f.engine.Start(t.Context(), retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: f.cutoff})
				if err != nil {
					t.Fatal(err)
				}
				clone := <-crashed
				f.stop()
				deleted := 0
				for _, sec := range f.purger.spent()[:crashAfter] {
					deleted += sec.days * pacedImages
				}

				s.fs = clone
				restarted := openPacedFixture(t, s)
				left, _ := countRows(t, restarted.repo)
				want := pacedCameras * pacedImages
				if outbox {
					want -= deleted
				}
				if left != want {
					t.Fatalf("the crash left %d expired rows, want %d (%d deleted by %d sections before it)", left, want, deleted, crashAfter)
				}
				restarted.run(t)
				restarted.await(t, j)
				if left, index := countRows(t, restarted.repo); left != 0 || index != 0 {
					t.Errorf("%d primary and %d index rows left after the resumed purge", left, index)
				}
			})
		})
	}
}

// seedPaced writes the cameras' expired images.
func seedPaced(t *testing.T, f *pacedFixture) {
	t.Helper()
	for _, res := range f.repo.BatchCreate(t.Context(), pacedImagesOf(time.Now().UTC())) {
		if res.Err != nil || res.Existed {
			t.Fatalf("seeding: %+v", res)
		}
	}
}

// countRows counts the rows of the repository's primary and index tables.
func countRows(t *testing.T, repo *images.Repository) (primaryRows, indexRows int) {
	t.Helper()
	primary, index := repo.Tables()
	return scanCount(t, primary), scanCount(t, index)
}

func scanCount(t *testing.T, table store.Table) int {
	t.Helper()
	n := 0
	scan := store.Scan{Select: []string{}}
	for {
		page, err := table.Scan(t.Context(), scan)
		if err != nil {
			t.Fatal(err)
		}
		n += len(page.Entities)
		if page.Next == nil {
			return n
		}
		scan.Resume = page.Next
	}
}
