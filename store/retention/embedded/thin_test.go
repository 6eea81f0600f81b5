package embedded_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/pebble"
	"github.com/metadatad/metadatad/store/retention"
	"github.com/metadatad/metadatad/store/retention/embedded"
	"github.com/metadatad/metadatad/store/retention/policy"
)

// tombstoneCounter is the embedded store, counting the point tombstones
// its sections write unread (DeleteUnread).
type tombstoneCounter struct {
	*pebble.DB
	unread atomic.Int64
}

func (c *tombstoneCounter) Exclusive(ctx context.Context, through time.Time, stage func(context.Context, store.PurgeBatch) error) error {
	return c.DB.Exclusive(ctx, through, func(ctx context.Context, pb store.PurgeBatch) error {
		return stage(ctx, &unreadCounting{PurgeBatch: pb, n: &c.unread})
	})
}

type unreadCounting struct {
	store.PurgeBatch
	n *atomic.Int64
}

func (b *unreadCounting) DeleteUnread(table string, key store.Key) error {
	b.n.Add(1)
	return b.PurgeBatch.DeleteUnread(table, key)
}

// TestThinningWritesOneIndexTombstonePerRow: on a store whose index holds
// only this service's key form, a thinning deletes each thinned row's
// index row by its one key; once the index holds a row in the fleet's
// form (a copy from Azure), by both forms, so that no index row of a
// thinned row is left in either. The counts are exact either way.
func TestThinningWritesOneIndexTombstonePerRow(t *testing.T) {
	const cameras, minutes, every = 3, 60, 15 * time.Minute
	const thinned = cameras * (minutes - minutes/15)
	for _, fleet := range []bool{false, true} {
		t.Run(map[bool]string{false: "own form", true: "fleet form too"}[fleet], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				log := slog.New(slog.DiscardHandler)
				db, err := pebble.Open(pebble.Options{Dir: "db", FS: vfs.NewMem(), Logger: log})
				if err != nil {
					t.Fatal(err)
				}
				defer db.Close()
				p := &tombstoneCounter{DB: db}
				repo, err := images.Open(t.Context(), p, images.Options{Kind: images.Single})
				if err != nil {
					t.Fatal(err)
				}
				e, err := retention.Open(t.Context(), retention.Options{Backend: p, Repositories: []*images.Repository{repo},
					Driver: embedded.Options{}.New, Logger: log, ReplicaID: "embedded"})
				if err != nil {
					t.Fatal(err)
				}
				first := time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, -3)
				var imgs []images.Image
				for c := range cameras {
					for m := range minutes {
						imgs = append(imgs, images.Image{CameraID: fmt.Sprintf("cam-%d", c), CapturedAt: first.Add(time.Duration(m)*time.Minute + time.Second)})
					}
				}
				for _, res := range repo.BatchCreate(t.Context(), imgs) {
					if res.Err != nil {
						t.Fatal(res.Err)
					}
				}
				if fleet {
					toFleetForm(t, repo, imgs[1]) // a thinned row
				}
				if _, err := e.Policies().CreatePolicy(t.Context(), policy.Policy{Scope: policy.ScopeDefault,
					Tiers: map[images.Kind][]policy.Tier{images.Single: {{AfterDays: 1, KeepOnePer: every}}}}); err != nil {
					t.Fatal(err)
				}
				f := &pacedFixture{engine: e, repo: repo}
				f.run(t)
				j, err := e.Start(t.Context(), retention.StartRequest{Kinds: []images.Kind{images.Single}, UsePolicies: true})
				if err != nil {
					t.Fatal(err)
				}
				for !j.State.Terminal() {
					time.Sleep(10 * time.Millisecond)
					if j, err = e.Get(t.Context(), j.ID); err != nil {
						t.Fatal(err)
					}
				}
				if c := j.Totals(); j.State != retention.Succeeded || c.ThinnedRows != thinned || c.IndexRows != thinned {
					t.Fatalf("job %s: %+v, want %d rows thinned with their index rows", j.State, c, thinned)
				}
				if primaryRows, indexRows := countRows(t, repo); primaryRows != cameras*minutes/15 || indexRows != primaryRows {
					t.Errorf("%d primary and %d index rows left, want %d of each", primaryRows, indexRows, cameras*minutes/15)
				}
				want := int64(thinned)
				if fleet {
					want *= 2
				}
				if got := p.unread.Load(); got != want {
					t.Errorf("%d index tombstones for %d thinned rows, want %d", got, thinned, want)
				}
			})
		})
	}
}

// toFleetForm rewrites img's index row in the fleet's key form, as a copy
// from Azure brings them.
func toFleetForm(t *testing.T, repo *images.Repository, img images.Image) {
	t.Helper()
	_, index := repo.Tables()
	img.RowKey = store.InvertedTicksRowKey(store.TruncateToTicks(img.CapturedAt))
	own, fleet := repo.IndexKeys(img.CameraID, img.RowKey)[0], repo.IndexKeys(img.CameraID, img.RowKey)[1]
	if err := index.Delete(t.Context(), own.PartitionKey, own.RowKey, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := index.Insert(t.Context(), store.Entity{PartitionKey: fleet.PartitionKey, RowKey: fleet.RowKey,
		Properties: store.Properties{images.PropDeviceID: img.CameraID, images.PropMetadataRowKey: img.RowKey}}); err != nil {
		t.Fatal(err)
	}
}
