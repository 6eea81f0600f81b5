package main

import (
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
	"github.com/metadatad/metadatad/internal/azurite"
)

// TestWatchAcrossDaemons runs two daemons on one Azurite account: a watch
// on one streams, in order, the images created through the other, and a
// SIGTERM ends the watch at once with UNAVAILABLE and a resume point rather
// than holding the stop (a shutdown timeout of 2 minutes would show).
func TestWatchAcrossDaemons(t *testing.T) {
	conn := azurite.Require(t)
	var id [4]byte
	_, _ = rand.Read(id[:])
	suffix := hex.EncodeToString(id[:])
	t.Setenv("AZURE_STORAGE_CONNECTION_STRING", conn)
	args := []string{"-store", "azure", "-azure-table-prefix", "w" + suffix, "-purge-queue", "purge-" + suffix,
		"-create-timeout", "1s", "-create-landing-margin", "1ms", "-watch-poll", "50ms", "-shutdown-timeout", "2m"}
	a := startDaemon(t, t.TempDir(), append(args, "-replica-id", "replica-a")...)
	b := startDaemon(t, t.TempDir(), append(args, "-replica-id", "replica-b")...)

	writer, watcher := a.client(t), b.client(t)
	create := func(at time.Time) *metadatav1.SingleImageMetadata {
		t.Helper()
		resp, err := writer.CreateSingleImageMetadata(t.Context(), &metadatav1.CreateSingleImageMetadataRequest{
			Metadata: &metadatav1.SingleImageMetadata{CameraId: "cam-1", CapturedAt: timestamppb.New(at)}})
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetMetadata()
	}
	now := time.Now().UTC()
	create(now)
	stream, err := watcher.WatchSingleImageMetadata(t.Context(), &metadatav1.WatchSingleImageMetadataRequest{
		CameraIds: []string{"cam-1"}, StartWithLatest: true})
	if err != nil {
		t.Fatal(err)
	}
	if first, err := stream.Recv(); err != nil || !first.GetExisting() {
		t.Fatalf("start_with_latest: %v, %v", first, err)
	}
	var last string
	for i := 1; i <= 5; i++ {
		want := create(now.Add(time.Duration(i) * time.Millisecond))
		got, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if got.GetMetadata().GetRowKey() != want.GetRowKey() {
			t.Fatalf("image %d through the other daemon: got %v, want %v", i, got.GetMetadata(), want)
		}
		last = got.GetResumeToken()
	}

	stop(t, b)
	_, err = stream.Recv()
	st := status.Convert(err)
	if st.Code() != codes.Unavailable {
		t.Fatalf("watch after SIGTERM: %v, want UNAVAILABLE", err)
	}
	var resume string
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			resume = info.GetMetadata()["resume_token"]
		}
	}
	if resume != last {
		t.Fatalf("resume point %q, want the last response's %q", resume, last)
	}
}

func TestParseConfigWatchResumeMaxAge(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		want    time.Duration
		wantErr bool
	}{
		{"default: the hour the API promises", nil, time.Hour, false},
		{"shorter", []string{"-watch-resume-max-age", "10m"}, 10 * time.Minute, false},
		{"zero refused", []string{"-watch-resume-max-age", "0s"}, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, ok := parseCase(t, tc.args, tc.wantErr)
			if !ok {
				return
			}
			if c.watchResumeMaxAge != tc.want {
				t.Errorf("-watch-resume-max-age %s, want %s", c.watchResumeMaxAge, tc.want)
			}
		})
	}
}
