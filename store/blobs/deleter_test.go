package blobs_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/metadatad/metadatad/internal/azurite"
	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/aztable"
	"github.com/metadatad/metadatad/store/blobs"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/pebble"
	"github.com/metadatad/metadatad/store/retention"
	"github.com/metadatad/metadatad/store/retention/drivers"
	"github.com/metadatad/metadatad/store/retention/queue"
)

func TestMain(m *testing.M) { os.Exit(azurite.Main(m)) }

// outbox is a fixed list of deleted images, each's token its Seq.
type outbox []retention.DeletedImage

func (o outbox) DeletedImages(_ context.Context, after string, limit int) ([]retention.DeletedImage, error) {
	var out []retention.DeletedImage
	pos, _ := strconv.ParseUint(after, 10, 64)
	for _, d := range o {
		if d.Seq > pos && len(out) < limit {
			d.Token = strconv.FormatUint(d.Seq, 10)
			out = append(out, d)
		}
	}
	return out, nil
}

// TestDeleterDeletesTheBlobsOfDeletedImages, on Azurite's blob service:
// the blobs the outbox names under an allowed container go, a blob already
// gone is no failure, a blob under another container stays, a dry run
// deletes nothing, and the position survives a new Deleter.
func TestDeleterDeletesTheBlobsOfDeletedImages(t *testing.T) {
	conn := azurite.RequireBlob(t)
	client, err := azblob.NewClientFromConnectionString(conn, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	var id [4]byte
	_, _ = rand.Read(id[:])
	allowed, other := "img"+hex.EncodeToString(id[:]), "keep"+hex.EncodeToString(id[:])
	for _, c := range []string{allowed, other} {
		if _, err := client.CreateContainer(ctx, c, nil); err != nil {
			t.Fatal(err)
		}
	}
	base := strings.TrimSuffix(client.URL(), "/")
	put := func(cont, name string) string {
		t.Helper()
		if _, err := client.UploadBuffer(ctx, cont, name, []byte("jpeg"), nil); err != nil {
			t.Fatal(err)
		}
		return base + "/" + cont + "/" + name
	}
	box := outbox{
		{Seq: 1, Kind: images.Single, CameraID: "cam-1", BlobURI: put(allowed, "cam-1/a b.jpg")},
		{Seq: 2, Kind: images.Single, CameraID: "cam-1", BlobURI: base + "/" + allowed + "/cam-1/never-uploaded.jpg"},
		{Seq: 3, Kind: images.Pano, CameraID: "cam-2", BlobURI: put(other, "cam-2/b.jpg")},
		{Seq: 4, Kind: images.Pano, CameraID: "cam-2", BlobURI: ""},
		{Seq: 5, Kind: images.Single, CameraID: "cam-3", BlobURI: put(allowed, "cam-3/c.jpg")},
	}
	// The blob of a kept image, which the outbox never names.
	kept := put(allowed, "cam-held/d.jpg")
	db, err := pebble.Open(pebble.Options{Dir: "db", FS: vfs.NewMem(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	position, err := db.Table(ctx, "BlobDeleter")
	if err != nil {
		t.Fatal(err)
	}
	opts := blobs.Options{Outbox: box, Client: client, Containers: []string{base + "/" + allowed}, Position: position,
		PerSecond: 1000, Logger: slog.New(slog.DiscardHandler)}
	exists := func(uri string) bool {
		t.Helper()
		name := strings.TrimPrefix(uri, base+"/")
		cont, blob, _ := strings.Cut(name, "/")
		_, err := client.ServiceClient().NewContainerClient(cont).NewBlobClient(blob).GetProperties(ctx, nil)
		return err == nil
	}

	opts.DryRun = true
	dry, err := blobs.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if c, _, err := dry.RunOnce(ctx); err != nil || c.Deleted != 3 || c.Outside != 2 {
		t.Fatalf("dry run: %+v, %v; want 3 to delete, 2 outside", c, err)
	}
	if !exists(box[0].BlobURI) {
		t.Fatal("a dry run deleted a blob")
	}

	opts.DryRun = false
	d, err := blobs.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if c, more, err := d.RunOnce(ctx); err != nil || c.Deleted != 3 || c.Outside != 2 || more {
		t.Fatalf("run: %+v, more %v, %v; want 3 deleted (one already gone), 2 outside, no more", c, more, err)
	}
	for uri, want := range map[string]bool{box[0].BlobURI: false, box[4].BlobURI: false, box[2].BlobURI: true, kept: true} {
		if got := exists(uri); got != want {
			t.Errorf("%s exists %v, want %v", uri, got, want)
		}
	}
	again, err := blobs.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if c, _, err := again.RunOnce(ctx); err != nil || c != (blobs.Counts{}) {
		t.Errorf("a new deleter on the same position: %+v, %v; want nothing left to do", c, err)
	}
}

// TestDeleterFollowsTheOutboxOfAnAzureStore: on Azurite's tables and blob
// service, a purge by the queue design records each image it deletes in
// the outbox, sealed as the job ends, and the deleter deletes their blobs
// and no other: not those of the images the cutoff keeps.
func TestDeleterFollowsTheOutboxOfAnAzureStore(t *testing.T) {
	conn := azurite.Require(t)
	client, err := azblob.NewClientFromConnectionString(azurite.RequireBlob(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	var id [4]byte
	_, _ = rand.Read(id[:])
	name := hex.EncodeToString(id[:])
	cont := "img" + name
	if _, err := client.CreateContainer(ctx, cont, nil); err != nil {
		t.Fatal(err)
	}
	containerURL := strings.TrimSuffix(client.URL(), "/") + "/" + cont
	log := slog.New(slog.DiscardHandler)
	tables, err := aztable.Open(ctx, aztable.Options{ConnectionString: conn, TablePrefix: "t" + name, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	repo, err := images.Open(ctx, tables, images.Options{Kind: images.Single, CreateTimeout: time.Second, LandingMargin: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var gone, kept []string
	for _, cam := range []string{"cam-1", "cam-2"} {
		for i := range 4 {
			blob := fmt.Sprintf("%s/%d.jpg", cam, i)
			if _, err := client.UploadBuffer(ctx, cont, blob, []byte("jpeg"), nil); err != nil {
				t.Fatal(err)
			}
			if _, err := repo.Create(ctx, images.Image{CameraID: cam, CapturedAt: at.Add(time.Duration(i) * time.Hour),
				BlobURI: containerURL + "/" + blob}); err != nil {
				t.Fatal(err)
			}
			if i < 2 {
				gone = append(gone, blob)
			} else {
				kept = append(kept, blob)
			}
		}
	}
	engine, err := retention.Open(ctx, retention.Options{Backend: tables, Repositories: []*images.Repository{repo}, Outbox: true, Driver: drivers.For(tables, queue.Options{VisibilityTimeout: time.Second}),
		Logger: log, PollInterval: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- engine.Run(runCtx) }()
	defer func() { stop(); <-ran }()
	j, err := engine.Start(ctx, retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: at.Add(2 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(2 * time.Minute); !j.State.Terminal(); time.Sleep(20 * time.Millisecond) {
		if j, err = engine.Get(ctx, j.ID); err != nil || time.Now().After(deadline) {
			t.Fatalf("job %+v, %v: not ended", j, err)
		}
	}
	if j.State != retention.Succeeded || j.Totals().MetadataRows != int64(len(gone)) {
		t.Fatalf("job %s deleted %+v; want %d rows", j.State, j.Totals(), len(gone))
	}
	position, err := tables.Table(ctx, "BlobDeleter")
	if err != nil {
		t.Fatal(err)
	}
	d, err := blobs.New(blobs.Options{Outbox: engine, Client: client, Containers: []string{containerURL}, Position: position,
		PerSecond: 1000, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	if c, more, err := d.RunOnce(ctx); err != nil || c.Deleted != len(gone) || c.Outside != 0 || more {
		t.Fatalf("run: %+v, more %v, %v; want %d deleted", c, more, err, len(gone))
	}
	for want, names := range map[bool][]string{false: gone, true: kept} {
		for _, b := range names {
			_, err := client.ServiceClient().NewContainerClient(cont).NewBlobClient(b).GetProperties(ctx, nil)
			if exists := err == nil; exists != want {
				t.Errorf("%s exists %v, want %v", b, exists, want)
			}
		}
	}
	if c, _, err := d.RunOnce(ctx); err != nil || c != (blobs.Counts{}) {
		t.Errorf("a second step: %+v, %v; want nothing left to do", c, err)
	}
}

// growingOutbox is an outbox that new deletions extend.
type growingOutbox struct{ rows outbox }

func (g *growingOutbox) DeletedImages(ctx context.Context, after string, limit int) ([]retention.DeletedImage, error) {
	return g.rows.DeletedImages(ctx, after, limit)
}

// TestADryRunWalksTheWholeOutbox: a dry run goes through every page of
// the outbox, then follows its new records, deleting nothing and leaving
// the stored position where it was: a real run after it starts at the
// first record. On Azurite's blob service.
func TestADryRunWalksTheWholeOutbox(t *testing.T) {
	client, err := azblob.NewClientFromConnectionString(azurite.RequireBlob(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	var id [4]byte
	_, _ = rand.Read(id[:])
	cont := "img" + hex.EncodeToString(id[:])
	if _, err := client.CreateContainer(ctx, cont, nil); err != nil {
		t.Fatal(err)
	}
	containerURL := strings.TrimSuffix(client.URL(), "/") + "/" + cont
	if _, err := client.UploadBuffer(ctx, cont, "cam-1/1.jpg", []byte("jpeg"), nil); err != nil {
		t.Fatal(err)
	}
	exists := func() bool {
		_, err := client.ServiceClient().NewContainerClient(cont).NewBlobClient("cam-1/1.jpg").GetProperties(ctx, nil)
		return err == nil
	}
	box := &growingOutbox{}
	add := func(seq uint64) {
		box.rows = append(box.rows, retention.DeletedImage{Seq: seq, Kind: images.Single, CameraID: "cam-1",
			BlobURI: fmt.Sprintf("%s/cam-1/%d.jpg", containerURL, seq)})
	}
	const records = 1201 // two full pages and one record
	for seq := range uint64(records) {
		add(seq + 1)
	}
	db, err := pebble.Open(pebble.Options{Dir: "db", FS: vfs.NewMem(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	position, err := db.Table(ctx, "BlobDeleter")
	if err != nil {
		t.Fatal(err)
	}
	opts := blobs.Options{Outbox: box, Client: client, Containers: []string{containerURL}, Position: position,
		PerSecond: 1000, DryRun: true, Logger: slog.New(slog.DiscardHandler)}
	dry, err := blobs.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	counted := 0
	for step := 1; ; step++ {
		c, more, err := dry.RunOnce(ctx)
		if err != nil {
			t.Fatal(err)
		}
		counted += c.Deleted
		if !more {
			break
		}
		if step > 3 {
			t.Fatalf("a dry run of %d records still has more after %d steps", records, step)
		}
	}
	if counted != records {
		t.Errorf("a dry run walked %d records, want all %d", counted, records)
	}
	add(records + 1)
	if c, more, err := dry.RunOnce(ctx); err != nil || c.Deleted != 1 || more {
		t.Errorf("a dry run after a new record: %+v, more %v, %v; want the new one alone", c, more, err)
	}
	if !exists() {
		t.Fatal("a dry run deleted a blob")
	}

	opts.DryRun = false
	live, err := blobs.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if c, more, err := live.RunOnce(ctx); err != nil || c.Deleted != 500 || !more {
		t.Fatalf("a real run after the dry one: %+v, more %v, %v; want the first page from the first record", c, more, err)
	}
	if exists() {
		t.Error("a real run after the dry one left the first record's blob")
	}
}

// numbered is an outbox whose tokens are numbers, refusing any other as
// ErrBadResumeToken.
type numbered struct{ outbox }

func (o numbered) DeletedImages(ctx context.Context, after string, limit int) ([]retention.DeletedImage, error) {
	if _, err := strconv.ParseUint(after, 10, 64); err != nil && after != "" {
		return nil, fmt.Errorf("%w: %q", retention.ErrBadResumeToken, after)
	}
	return o.outbox.DeletedImages(ctx, after, limit)
}

// TestAPositionOfTheOtherStoresOutboxStartsAfresh: a stored position that
// this store's outbox refuses as not its own (as Azure's queue design
// refuses the embedded store's numbers that `metadatad copy` brought over)
// makes the deleter read the outbox from its start instead of failing
// every step.
func TestAPositionOfTheOtherStoresOutboxStartsAfresh(t *testing.T) {
	client, err := azblob.NewClientFromConnectionString(azurite.RequireBlob(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	db, err := pebble.Open(pebble.Options{Dir: "db", FS: vfs.NewMem(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	position, err := db.Table(ctx, "BlobDeleter")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := position.Upsert(ctx, store.Entity{PartitionKey: "blobs", RowKey: "deleter",
		Properties: store.Properties{"Token": "3.0123456789abcdef"}}, store.Replace); err != nil {
		t.Fatal(err)
	}
	const container = "https://acct.blob.core.windows.net/images"
	box := numbered{outbox{{Seq: 1, Kind: images.Single, CameraID: "cam-1", BlobURI: container + "/cam-1/1.jpg"},
		{Seq: 2, Kind: images.Single, CameraID: "cam-1", BlobURI: container + "/cam-1/2.jpg"}}}
	d, err := blobs.New(blobs.Options{Outbox: box, Client: client, Containers: []string{container}, Position: position,
		PerSecond: 1000, DryRun: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if c, _, err := d.RunOnce(ctx); err != nil || c.Deleted != 2 {
		t.Errorf("a step from another outbox's position: %+v, %v; want both records from the start", c, err)
	}
}

// TestDeleterStats: the steps' counts add up, a failed step is counted and
// leaves the deleter behind by its record's deletion time, and a step
// that catches up leaves it behind by nothing.
func TestDeleterStats(t *testing.T) {
	ctx := t.Context()
	// A blob service that is not there: every delete fails, at once.
	client, err := azblob.NewClientWithNoCredential("http://127.0.0.1:1/acct/",
		&azblob.ClientOptions{ClientOptions: azcore.ClientOptions{Retry: policy.RetryOptions{MaxRetries: -1}}})
	if err != nil {
		t.Fatal(err)
	}
	db, err := pebble.Open(pebble.Options{Dir: "db", FS: vfs.NewMem(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	position, err := db.Table(ctx, "BlobDeleter")
	if err != nil {
		t.Fatal(err)
	}
	const container = "http://127.0.0.1:1/acct/images"
	deletedAt := time.Date(2026, 12, 1, 3, 17, 0, 0, time.UTC)
	box := outbox{{Seq: 1, Kind: images.Single, CameraID: "cam-1", BlobURI: "https://elsewhere/x.jpg", DeletedAt: deletedAt},
		{Seq: 2, Kind: images.Single, CameraID: "cam-1", BlobURI: container + "/cam-1/2.jpg", DeletedAt: deletedAt.Add(time.Minute)}}
	opts := blobs.Options{Outbox: box, Client: client, Containers: []string{container}, Position: position,
		PerSecond: 1000, Logger: slog.New(slog.DiscardHandler)}
	d, err := blobs.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.RunOnce(ctx); err == nil {
		t.Fatal("a delete from a blob service that is not there succeeded")
	}
	if got, want := d.Stats(), (blobs.Stats{Outside: 1, Failed: 1, Behind: deletedAt.Add(time.Minute)}); got != want {
		t.Errorf("after a failed step: %+v, want %+v", got, want)
	}
	opts.DryRun = true
	dry, err := blobs.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := dry.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := dry.Stats(), (blobs.Stats{Deleted: 1}); got != want {
		t.Errorf("after a step that caught up: %+v, want %+v", got, want)
	}
}
