package main

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
	"github.com/metadatad/metadatad/store/images"
)

// TestARestoreRefusesTheOutboxPositionsItLost is issue 42's reproduction:
// a backup taken, deletions recorded and read after it, the older backup
// restored with metadatad restore, and more images deleted on the
// restored store than were lost. A consumer resuming with its newer
// token is refused OUT_OF_RANGE instead of receiving only the deletions
// past its position; from the backup's end it receives every new one.
func TestARestoreRefusesTheOutboxPositionsItLost(t *testing.T) {
	dataDir := t.TempDir()
	d := startDaemon(t, dataDir, "-retention-outbox")
	conn := d.conn(t)
	backupEnd, _ := deleteImages(t, conn, "cam-a", 3, "")
	backupDir := filepath.Join(t.TempDir(), "backup")
	if err := runBackup(t.Context(), []string{"-server", d.addr, "-to", backupDir}, io.Discard); err != nil {
		t.Fatalf("backup: %v", err)
	}
	newer, lost := deleteImages(t, conn, "cam-lost", 5, backupEnd)
	stop(t, d)

	restored := filepath.Join(t.TempDir(), "restored")
	if err := runRestore(t.Context(), []string{"-from", backupDir, "-data-dir", restored}, io.Discard); err != nil {
		t.Fatalf("restore: %v", err)
	}
	d = startDaemon(t, restored, "-retention-outbox")
	conn = d.conn(t)
	_, fresh := deleteImages(t, conn, "cam-new", 12, backupEnd)
	if len(fresh) != 12 || len(lost) != 5 {
		t.Fatalf("%d deletions after the backup's end on the restored store, %d lost; want 12 and 5", len(fresh), len(lost))
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	stream, err := metadatav1.NewRetentionServiceClient(conn).WatchDeletedImages(ctx, &metadatav1.WatchDeletedImagesRequest{ResumeToken: newer})
	if err == nil {
		var resp *metadatav1.WatchDeletedImagesResponse
		resp, err = stream.Recv()
		if err == nil {
			t.Fatalf("resuming from %q, lost by the restore: %d images, want OUT_OF_RANGE", newer, len(resp.GetImages()))
		}
	}
	if status.Code(err) != codes.OutOfRange {
		t.Fatalf("resuming from %q, lost by the restore: %v, want OUT_OF_RANGE", newer, err)
	}
	stop(t, d)
}

// deleteImages creates n single images of camera, purges them and reads
// the outbox after token until it has them: it returns the token after
// them and the images read.
func deleteImages(t *testing.T, conn *grpc.ClientConn, camera string, n int, token string) (string, []*metadatav1.DeletedImage) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	clients := newImageClients(conn)
	for i := range n {
		if err := clients.create(ctx, written{kind: images.Single, camera: camera, at: crashBase.Add(time.Duration(i) * time.Minute)}); err != nil {
			t.Fatalf("create: %v", err)
		}
	}
	rs := metadatav1.NewRetentionServiceClient(conn)
	start, err := rs.StartPurge(ctx, &metadatav1.StartPurgeRequest{ImageTypes: []metadatav1.ImageType{metadatav1.ImageType_IMAGE_TYPE_SINGLE},
		Cutoff: &metadatav1.StartPurgeRequest_CutoffTime{CutoffTime: timestamppb.New(crashBase.Add(24 * time.Hour))}})
	if err != nil {
		t.Fatalf("StartPurge: %v", err)
	}
	watch, err := rs.WatchPurge(ctx, &metadatav1.WatchPurgeRequest{JobId: start.GetJob().GetJobId()})
	if err != nil {
		t.Fatalf("WatchPurge: %v", err)
	}
	for {
		if _, err := watch.Recv(); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("WatchPurge: %v", err)
		}
	}
	stream, err := rs.WatchDeletedImages(ctx, &metadatav1.WatchDeletedImagesRequest{ResumeToken: token})
	if err != nil {
		t.Fatalf("WatchDeletedImages: %v", err)
	}
	var got []*metadatav1.DeletedImage
	for len(got) < n {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatalf("WatchDeletedImages after %q, %d of %d images read: %v", token, len(got), n, err)
		}
		got, token = append(got, resp.GetImages()...), resp.GetResumeToken()
	}
	for _, img := range got {
		if img.GetCameraId() != camera {
			t.Errorf("deleted images after the last token: %s's, want only %s's", img.GetCameraId(), camera)
		}
	}
	return token, got
}
