package blobs_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/metadatad/metadatad/internal/azurite"
	"github.com/metadatad/metadatad/store/blobs"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/pebble"
	"github.com/metadatad/metadatad/store/retention"
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
