package backup_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/pebble"
	"github.com/metadatad/metadatad/store/pebble/backup"
	"github.com/metadatad/metadatad/store/retention"
	"github.com/metadatad/metadatad/store/retention/embedded"
)

// pausingBackend is the embedded store whose purge batches (Exclusive)
// pass until the pauseAt-th, which holds, with every later one, until its
// context ends.
type pausingBackend struct {
	*pebble.DB
	pauseAt    int
	exclusives int
	paused     chan struct{}
}

func (b *pausingBackend) Exclusive(ctx context.Context, through time.Time, stage func(context.Context, store.PurgeBatch) error) error {
	b.exclusives++ // one job: no other batch runs meanwhile
	if b.exclusives == b.pauseAt {
		close(b.paused)
	}
	if b.exclusives >= b.pauseAt {
		<-ctx.Done()
		return ctx.Err()
	}
	return b.DB.Exclusive(ctx, through, stage)
}

func openEngine(t *testing.T, backend store.Backend) *retention.Engine {
	t.Helper()
	repos := make([]*images.Repository, 0, len(images.Kinds))
	for _, k := range images.Kinds {
		repos = append(repos, openRepo(t, backend, k))
	}
	e, err := retention.Open(t.Context(), retention.Options{
		Backend: backend, Repositories: repos, Logger: slog.New(slog.DiscardHandler),
		SectionCameras: 2, PollInterval: 10 * time.Millisecond, ReplicaID: "embedded",
		Driver: embedded.New,
	})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// runEngine runs e until the returned function is called.
func runEngine(e *retention.Engine) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = e.Run(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
}

// TestPurgeInFlightResumesAfterRestore: a backup taken while a purge is
// half way through its deletes restores a store on which the purge resumes
// at the next start and ends as if it had never stopped: succeeded, exact
// counts, every expired row gone with its index row, every other row kept.
// (A restore is a crash at the backup's instant; a purge whose start was
// not yet confirmed ends failed instead, without deleting anything, as
// retention's TestFailedStartNeverRuns shows for a crash.)
func TestPurgeInFlightResumesAfterRestore(t *testing.T) {
	const cameras, expiredEach, freshEach = 10, 3, 2
	dataDir := t.TempDir()
	db, closeDB := openStore(t, dataDir)
	seed := openRepo(t, db, images.Single)
	var expired, fresh []images.Image
	for c := range cameras {
		for i := range expiredEach + freshEach {
			img, err := seed.Create(t.Context(), images.Image{CameraID: fmt.Sprintf("cam-%02d", c),
				CapturedAt: base.Add(time.Duration(i*10) * time.Minute)})
			if err != nil {
				t.Fatal(err)
			}
			if i < expiredEach {
				expired = append(expired, img)
			} else {
				fresh = append(fresh, img)
			}
		}
	}
	cutoff := base.Add(time.Duration(expiredEach*10) * time.Minute)

	// Two sections of two cameras pass; the third holds while the backup is taken.
	paused := &pausingBackend{DB: db, pauseAt: 3, paused: make(chan struct{})}
	engine := openEngine(t, paused)
	stopEngine := runEngine(engine)
	job, err := engine.Start(t.Context(), retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: cutoff})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-paused.paused:
	case <-time.After(30 * time.Second):
		t.Fatal("the purge never reached its third section")
	}
	backupDir := takeBackup(t, db, dataDir)
	stopEngine()
	closeDB()

	restored := filepath.Join(t.TempDir(), "restored")
	if _, err := backup.Restore(t.Context(), backupDir, restored); err != nil {
		t.Fatal(err)
	}
	rdb, _ := openStore(t, restored)
	repo := openRepo(t, rdb, images.Single)
	rprimary, rindex := repo.Tables()
	deleted := 0
	for _, img := range expired {
		if _, err := rprimary.Get(t.Context(), img.CameraID, img.RowKey); errors.Is(err, store.ErrNotFound) {
			deleted++
		}
	}
	if deleted == 0 || deleted == len(expired) {
		t.Fatalf("the backup holds %d of %d expired rows deleted; want a purge half way", deleted, len(expired))
	}
	inBackup, err := openEngine(t, rdb).Get(t.Context(), job.ID)
	if err != nil || inBackup.State.Terminal() {
		t.Fatalf("the job in the backup: %+v, %v; want it unfinished", inBackup, err)
	}

	resumed := openEngine(t, rdb)
	defer runEngine(resumed)()
	deadline := time.Now().Add(30 * time.Second)
	var j *retention.Job
	for j, err = resumed.Get(t.Context(), job.ID); err == nil && !j.State.Terminal(); j, err = resumed.Get(t.Context(), job.ID) {
		if time.Now().After(deadline) {
			t.Fatalf("the restored purge did not end: %+v", j)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	want := retention.Counts{DevicesTotal: cameras, DevicesDone: cameras, MetadataRows: cameras * expiredEach, IndexRows: cameras * expiredEach}
	if j.State != retention.Succeeded || j.Totals() != want {
		t.Fatalf("restored purge ended %s (%s) with %+v, want succeeded with %+v", j.State, j.Error, j.Totals(), want)
	}
	for _, img := range expired {
		if _, err := rprimary.Get(t.Context(), img.CameraID, img.RowKey); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("expired primary row %s %s: %v, want not found", img.CameraID, img.CapturedAt, err)
		}
		pk := images.IndexPartitionKey(img.CapturedAt, img.CameraID, 1)
		if _, err := rindex.Get(t.Context(), pk, images.IndexRowKey(img.RowKey, img.CameraID)); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("expired index row %s %s: %v, want not found", img.CameraID, img.CapturedAt, err)
		}
	}
	for _, img := range fresh {
		requireImage(t, repo, img)
	}
}
