package server_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/timestamppb"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
	"github.com/metadatad/metadatad/server"
	"github.com/metadatad/metadatad/store/acquisition"
	"github.com/metadatad/metadatad/store/devices"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/pebble"
	"github.com/metadatad/metadatad/store/retention"
	"github.com/metadatad/metadatad/store/retention/embedded"
	"github.com/metadatad/metadatad/store/video"
)

// exampleServer serves metadatad on an embedded store in a temporary
// directory, on a loopback port, as `metadatad` with its defaults does, and
// returns a client connection to it and the function that stops it all.
func exampleServer() (*grpc.ClientConn, func()) {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "metadatad-example")
	if err != nil {
		log.Fatal(err)
	}
	quiet := slog.New(slog.DiscardHandler)
	db, err := pebble.Open(pebble.Options{Dir: dir, Logger: quiet})
	if err != nil {
		log.Fatal(err)
	}
	repos := map[images.Kind]*images.Repository{}
	for _, kind := range images.Kinds {
		if repos[kind], err = images.Open(ctx, db, images.Options{Kind: kind}); err != nil {
			log.Fatal(err)
		}
	}
	videos, err := video.Open(ctx, db, video.Options{})
	if err != nil {
		log.Fatal(err)
	}
	deviceStates, err := devices.Open(ctx, db, devices.Options{})
	if err != nil {
		log.Fatal(err)
	}
	acquisitions, err := acquisition.Open(ctx, db, acquisition.Options{Logger: quiet})
	if err != nil {
		log.Fatal(err)
	}
	engine, err := retention.Open(ctx, retention.Options{Backend: db, Logger: quiet, Driver: embedded.New,
		Repositories: []*images.Repository{repos[images.Single], repos[images.Pano], repos[images.PreStitch]}})
	if err != nil {
		log.Fatal(err)
	}
	srv, err := server.New(server.Options{Single: repos[images.Single], Pano: repos[images.Pano], PreStitch: repos[images.PreStitch],
		Retention: engine, Video: videos, Devices: deviceStates, Acquisition: acquisitions, Logger: quiet})
	if err != nil {
		log.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	purges, stopPurges := context.WithCancel(ctx)
	purged := make(chan error, 1)
	go func() { purged <- engine.Run(purges) }()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	return conn, func() {
		conn.Close()
		shutdown, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
		<-served
		stopPurges()
		<-purged
		db.Close()
		os.RemoveAll(dir)
	}
}

// exampleMinute is an instant of 2026-01-01.
func exampleMinute(m int) *timestamppb.Timestamp {
	return timestamppb.New(time.Date(2026, 1, 1, 0, m, 0, 0, time.UTC))
}

// An acquisition service stores each image's metadata; a frontend reads a
// camera's newest image.
func Example_createAndReadTheLatest() {
	conn, stop := exampleServer()
	defer stop()
	ctx := context.Background()
	images := metadatav1.NewSingleImageMetadataServiceClient(conn)
	for m := range 3 {
		_, err := images.CreateSingleImageMetadata(ctx, &metadatav1.CreateSingleImageMetadataRequest{
			Metadata: &metadatav1.SingleImageMetadata{CameraId: "cam-1", CapturedAt: exampleMinute(m),
				BlobUri: fmt.Sprintf("https://blobs.example/cam-1/%04d.jpg", m), ContentType: "image/jpeg"}})
		if err != nil {
			log.Fatal(err)
		}
	}
	latest, err := images.GetLatestSingleImageMetadata(ctx, &metadatav1.GetLatestSingleImageMetadataRequest{CameraId: "cam-1"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(latest.Metadata.BlobUri, latest.Metadata.CapturedAt.AsTime().Format(time.RFC3339))
	// Output: https://blobs.example/cam-1/0002.jpg 2026-01-01T00:02:00Z
}

// A backlog upload stores many images in one call; each gets its own
// result, so one bad image fails alone, and a retried upload finds its
// images already there.
func Example_batchUpload() {
	conn, stop := exampleServer()
	defer stop()
	ctx := context.Background()
	images := metadatav1.NewSingleImageMetadataServiceClient(conn)
	req := &metadatav1.BatchCreateSingleImageMetadataRequest{Metadata: []*metadatav1.SingleImageMetadata{
		{CameraId: "cam-7", CapturedAt: exampleMinute(0), BlobUri: "https://blobs.example/cam-7/0000.jpg"},
		{CameraId: "cam-7", BlobUri: "https://blobs.example/cam-7/no-time.jpg"}, // no captured_at
		{CameraId: "cam-8", CapturedAt: exampleMinute(0), BlobUri: "https://blobs.example/cam-8/0000.jpg"},
	}}
	for _, attempt := range []string{"first", "retry"} {
		resp, err := images.BatchCreateSingleImageMetadata(ctx, req)
		if err != nil {
			log.Fatal(err)
		}
		for i, r := range resp.Results {
			fmt.Printf("%s %d: code %d, already existed %v\n", attempt, i, r.Status.GetCode(), r.AlreadyExisted)
		}
	}
	// Output:
	// first 0: code 0, already existed false
	// first 1: code 3, already existed false
	// first 2: code 0, already existed false
	// retry 0: code 0, already existed true
	// retry 1: code 3, already existed false
	// retry 2: code 0, already existed true
}

// A scheduler purges what is older than a cutoff and follows the job to
// its end; the counts are exact.
func Example_purge() {
	conn, stop := exampleServer()
	defer stop()
	ctx := context.Background()
	images := metadatav1.NewSingleImageMetadataServiceClient(conn)
	for m := range 4 {
		if _, err := images.CreateSingleImageMetadata(ctx, &metadatav1.CreateSingleImageMetadataRequest{
			Metadata: &metadatav1.SingleImageMetadata{CameraId: "cam-9", CapturedAt: exampleMinute(m), BlobUri: "https://blobs.example/cam-9.jpg"}}); err != nil {
			log.Fatal(err)
		}
	}
	purges := metadatav1.NewRetentionServiceClient(conn)
	started, err := purges.StartPurge(ctx, &metadatav1.StartPurgeRequest{
		ImageTypes: []metadatav1.ImageType{metadatav1.ImageType_IMAGE_TYPE_SINGLE}, Cutoff: &metadatav1.StartPurgeRequest_CutoffTime{CutoffTime: exampleMinute(2)}})
	if err != nil {
		log.Fatal(err)
	}
	watch, err := purges.WatchPurge(ctx, &metadatav1.WatchPurgeRequest{JobId: started.Job.JobId})
	if err != nil {
		log.Fatal(err)
	}
	var job *metadatav1.PurgeJob
	for {
		snapshot, err := watch.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			log.Fatal(err)
		}
		job = snapshot.Job
	}
	fmt.Println(job.State, job.MetadataRowsDeleted, job.IndexRowsDeleted)
	left, err := images.ListSingleImageMetadata(ctx, &metadatav1.ListSingleImageMetadataRequest{CameraId: "cam-9"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(left.Metadata), "images left")
	// Output:
	// PURGE_STATE_SUCCEEDED 2 2
	// 2 images left
}
