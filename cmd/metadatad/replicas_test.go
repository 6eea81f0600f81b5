package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
	"github.com/metadatad/metadatad/internal/azurite"
)

// TestTwoDaemonsShareOneAzureAccount runs two daemons on one Azurite
// account, as two replicas behind a load balancer: images written through
// one are read through the other, a purge started on one is watched to its
// end on the other, and both answer the same for the job.
func TestTwoDaemonsShareOneAzureAccount(t *testing.T) {
	conn := azurite.Require(t)
	var id [4]byte
	_, _ = rand.Read(id[:])
	suffix := hex.EncodeToString(id[:])
	t.Setenv("AZURE_STORAGE_CONNECTION_STRING", conn)
	// Creates bounded to 1 s: the purge then trusts index rows 1 s after
	// their create, instead of the default two minutes.
	const createTimeout, landingMargin = time.Second, time.Millisecond
	args := []string{"-store", "azure", "-azure-table-prefix", "r" + suffix, "-purge-queue", "purge-" + suffix,
		"-create-timeout", createTimeout.String(), "-create-landing-margin", landingMargin.String()}
	a := startDaemon(t, t.TempDir(), append(args, "-replica-id", "replica-a")...)
	b := startDaemon(t, t.TempDir(), append(args, "-replica-id", "replica-b")...)

	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	images := a.client(t)
	for _, camera := range []string{"cam-1", "cam-2", "cam-3"} {
		for m := range 4 {
			_, err := images.CreateSingleImageMetadata(t.Context(), &metadatav1.CreateSingleImageMetadataRequest{
				Metadata: &metadatav1.SingleImageMetadata{CameraId: camera, CapturedAt: timestamppb.New(base.Add(time.Duration(m) * time.Minute))}})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	time.Sleep(createTimeout + landingMargin)
	latest, err := b.client(t).GetLatestSingleImageMetadata(t.Context(), &metadatav1.GetLatestSingleImageMetadataRequest{CameraId: "cam-2"})
	if err != nil || !latest.GetMetadata().GetCapturedAt().AsTime().Equal(base.Add(3*time.Minute)) {
		t.Fatalf("latest of cam-2 through the other daemon: %v, %v", latest, err)
	}

	retentionA := metadatav1.NewRetentionServiceClient(a.conn(t))
	retentionB := metadatav1.NewRetentionServiceClient(b.conn(t))
	started, err := retentionB.StartPurge(t.Context(), &metadatav1.StartPurgeRequest{
		ImageTypes: []metadatav1.ImageType{metadatav1.ImageType_IMAGE_TYPE_SINGLE},
		Cutoff:     &metadatav1.StartPurgeRequest_CutoffTime{CutoffTime: timestamppb.New(base.Add(2 * time.Minute))}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = retentionA.StartPurge(t.Context(), &metadatav1.StartPurgeRequest{
		Cutoff: &metadatav1.StartPurgeRequest_RetentionDays{RetentionDays: 30}})
	if err == nil || !strings.Contains(err.Error(), started.GetJob().GetJobId()) {
		t.Fatalf("an overlapping purge on the other daemon: %v, want it refused naming %s", err, started.GetJob().GetJobId())
	}

	stream, err := retentionA.WatchPurge(t.Context(), &metadatav1.WatchPurgeRequest{JobId: started.GetJob().GetJobId()})
	if err != nil {
		t.Fatal(err)
	}
	var last *metadatav1.PurgeJob
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		last = resp.GetJob()
	}
	if last.GetState() != metadatav1.PurgeState_PURGE_STATE_SUCCEEDED || last.GetMetadataRowsDeleted() != 6 || last.GetIndexRowsDeleted() != 6 {
		t.Fatalf("purge watched on the other daemon ended %v", last)
	}
	fromA, errA := retentionA.GetPurge(t.Context(), &metadatav1.GetPurgeRequest{JobId: started.GetJob().GetJobId()})
	fromB, errB := retentionB.GetPurge(t.Context(), &metadatav1.GetPurgeRequest{JobId: started.GetJob().GetJobId()})
	if errA != nil || errB != nil || !proto.Equal(fromA.GetJob(), fromB.GetJob()) {
		t.Fatalf("the daemons disagree on the job:\n a %v (%v)\n b %v (%v)", fromA.GetJob(), errA, fromB.GetJob(), errB)
	}
	list, err := b.client(t).ListSingleImageMetadata(t.Context(), &metadatav1.ListSingleImageMetadataRequest{CameraId: "cam-1"})
	if err != nil || len(list.GetMetadata()) != 2 {
		t.Fatalf("cam-1 after the purge: %d images, %v; want the 2 young ones", len(list.GetMetadata()), err)
	}
}

// TestAzureConfigurationErrorsKeepSecrets starts the daemon with a bad
// Azure configuration: it must fail with a clear message that does not
// repeat the account key.
func TestAzureConfigurationErrorsKeepSecrets(t *testing.T) {
	const key = "c2VjcmV0LWFjY291bnQta2V5LXRoYXQtbXVzdC1ub3QtbGVhaw=="
	t.Setenv("AZURE_STORAGE_CONNECTION_STRING", "")
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"nothing to connect with", []string{"-store", "azure"}},
		{"development shorthand", []string{"-store", "azure", "-azure-connection-string", "UseDevelopmentStorage=true"}},
		{"malformed connection string", []string{"-store", "azure", "-azure-connection-string", "AccountKey=" + key + ";nonsense"}},
		{"table URL without queue URL", []string{"-store", "azure", "-azure-table-url", "https://a.table.core.windows.net"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := run(append(tc.args, "-listen", "127.0.0.1:0", "-data-dir", t.TempDir(), "-log-level", "error"), io.Discard)
			if err == nil {
				t.Fatal("started")
			}
			if strings.Contains(err.Error(), key) {
				t.Fatalf("error %q repeats the account key", err)
			}
		})
	}
}
