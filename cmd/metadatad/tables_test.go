package main

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/pebble"
)

// TestTableNamesReachTheStore starts the daemon with every table name
// changed and finds each service's rows under the names given, the index
// and active tables following their primary's name, and none under the
// default names.
func TestTableNamesReachTheStore(t *testing.T) {
	dataDir := t.TempDir()
	d := startDaemon(t, dataDir,
		"-single-image-table", "CustomSingles", "-pano-image-table", "CustomPanos", "-pre-stitch-image-table", "CustomPreStitches",
		"-video-table", "CustomVideos",
		"-device-state-table", "CustomDevices", "-acquisition-instance-table", "CustomRuns")
	conn := d.conn(t)
	ctx := t.Context()
	at := timestamppb.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	if _, err := metadatav1.NewSingleImageMetadataServiceClient(conn).CreateSingleImageMetadata(ctx,
		&metadatav1.CreateSingleImageMetadataRequest{Metadata: &metadatav1.SingleImageMetadata{CameraId: "cam-1", CapturedAt: at}}); err != nil {
		t.Fatal(err)
	}
	if _, err := metadatav1.NewPanoImageMetadataServiceClient(conn).CreatePanoImageMetadata(ctx,
		&metadatav1.CreatePanoImageMetadataRequest{Metadata: &metadatav1.PanoImageMetadata{CameraId: "cam-1", CapturedAt: at}}); err != nil {
		t.Fatal(err)
	}
	if _, err := metadatav1.NewPreStitchImageMetadataServiceClient(conn).CreatePreStitchImageMetadata(ctx,
		&metadatav1.CreatePreStitchImageMetadataRequest{Metadata: &metadatav1.PreStitchImageMetadata{CameraId: "cam-1", CapturedAt: at}}); err != nil {
		t.Fatal(err)
	}
	if _, err := metadatav1.NewVideoMetadataServiceClient(conn).CreateVideoMetadata(ctx,
		&metadatav1.CreateVideoMetadataRequest{Metadata: &metadatav1.VideoMetadata{CameraId: "cam-1", CapturedAt: at}}); err != nil {
		t.Fatal(err)
	}
	if _, err := metadatav1.NewDeviceStateServiceClient(conn).UpdateDeviceState(ctx,
		&metadatav1.UpdateDeviceStateRequest{DeviceState: &metadatav1.DeviceState{DeviceId: "cam-1"}, AllowMissing: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := metadatav1.NewAcquisitionInstanceServiceClient(conn).RecordAcquisitionInstance(ctx,
		&metadatav1.RecordAcquisitionInstanceRequest{Instance: &metadatav1.AcquisitionInstance{
			InstanceId: "run-1", DeviceId: "cam-1", RuntimeStatus: metadatav1.RuntimeStatus_RUNTIME_STATUS_RUNNING,
			CreateTime: timestamppb.Now(), LastUpdateTime: timestamppb.Now()}}); err != nil {
		t.Fatal(err)
	}
	stop(t, d)

	db, err := pebble.Open(pebble.Options{Dir: dataDir})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, name := range []string{"CustomSingles", "CustomSinglesIndex", "CustomPanos", "CustomPanosIndex",
		"CustomPreStitches", "CustomPreStitchesIndex", "CustomVideos", "CustomDevices", "CustomRuns", "CustomRunsActive"} {
		tbl, err := db.Table(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		page, err := tbl.Scan(context.Background(), store.Scan{})
		if err != nil || len(page.Entities) != 1 {
			t.Errorf("table %s holds %d rows, %v; want the one written", name, len(page.Entities), err)
		}
	}
	for _, name := range []string{"SingleImageMetadata", "SingleImageMetadataIndex", "PanoImageMetadata", "PanoImageMetadataIndex",
		"PreStitchImageMetadata", "PreStitchImageMetadataIndex", "VideoMetadata", "DurableEntityData",
		"ImageAcquisitionInstance", "ImageAcquisitionInstanceActive"} {
		tbl, err := db.Table(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		page, err := tbl.Scan(context.Background(), store.Scan{})
		if err != nil || len(page.Entities) != 0 {
			t.Errorf("default table %s holds %d rows, %v; want none", name, len(page.Entities), err)
		}
	}
}
