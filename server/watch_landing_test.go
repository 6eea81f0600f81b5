package server_test

import (
	"context"
	"testing"
	"time"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
	"github.com/metadatad/metadatad/server"
	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
)

// heldPrimary holds back the primary insert of one camera's create until
// release is closed, after closing indexed: the index row is written, the
// image not yet readable.
type heldPrimary struct {
	store.Backend
	camera           string
	indexed, release chan struct{}
}

func (b heldPrimary) Table(ctx context.Context, name string) (store.Table, error) {
	t, err := b.Backend.Table(ctx, name)
	if err != nil || name != images.Single.DefaultTable() {
		return t, err
	}
	return heldPrimaryTable{Table: t, b: b}, nil
}

type heldPrimaryTable struct {
	store.Table
	b heldPrimary
}

func (t heldPrimaryTable) Insert(ctx context.Context, e store.Entity) (store.Entity, error) {
	if e.PartitionKey == t.b.camera {
		close(t.b.indexed)
		<-t.b.release
	}
	return t.Table.Insert(ctx, e)
}

// TestWatchGetsAnImageThatLandsAfterItBegan runs two servers on one Azurite
// account. A create on the writer has written its index row, and its
// primary row is held back; the watcher's tail meets the index row while
// nobody watches the camera, then a watch of it begins, then the primary
// row lands. The image became readable while the watch was open: the watch
// receives it.
func TestWatchGetsAnImageThatLandsAfterItBegan(t *testing.T) {
	open := sharedAzure(t)
	opts := serverOpts{watch: server.WatchOptions{Poll: tailPoll}}
	held := heldPrimary{Backend: open(), camera: "cam-x", indexed: make(chan struct{}), release: make(chan struct{})}
	writer, watcher := startServerOpts(t, held, opts), startServerOpts(t, open(), opts)
	now := time.Now().UTC()
	created := make(chan string, 1)
	go func() {
		resp, err := writer.single.CreateSingleImageMetadata(context.Background(), &metadatav1.CreateSingleImageMetadataRequest{
			Metadata: &metadatav1.SingleImageMetadata{CameraId: "cam-x", CapturedAt: timestamp(now), BlobUri: "blob://cam-x"}})
		if err != nil {
			t.Errorf("create of cam-x: %v", err)
		}
		created <- imageKey(resp.GetMetadata())
	}()
	<-held.indexed
	// The watcher's tail passes over the index row: cam-x is not watched.
	time.Sleep(10 * tailPoll)
	createSingle(t, writer.single, "cam-y", now)
	// The latest image of cam-y arrives once the watch has begun.
	w := openWatch(t, watcher.single, &metadatav1.WatchSingleImageMetadataRequest{CameraIds: []string{"cam-x", "cam-y"}, StartWithLatest: true})
	w.recv(t, 1)
	close(held.release)
	want := <-created
	w.recvUntil(t, []string{want})
}
