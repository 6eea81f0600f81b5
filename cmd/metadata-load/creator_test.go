package main

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
)

// plainRequest is the create request of an image built the plain way, one
// message and map per call.
func plainRequest(f *fleet, k kind, camera int, at time.Time) proto.Message {
	id, n := f.ids[camera], noise(camera, at, k)
	stamp := at.UTC().Format("2006/01/02/1504")
	attrs := maps.Clone(f.attrs[camera])
	attrs["exposure_ms"] = fmt.Sprint(2 + n%30)
	attrs["iso"] = fmt.Sprint(100 << (n >> 8 % 4))
	captured := timestamppb.New(at)
	switch k {
	case pano:
		return &metadatav1.CreatePanoImageMetadataRequest{Metadata: &metadatav1.PanoImageMetadata{
			CameraId: id, CapturedAt: captured, BlobUri: "https://images.example.net/" + id + "/pano/" + stamp + ".jpg",
			ContentType: "image/jpeg", SizeBytes: 2_000_000 + int64(n%1_500_000), Width: 8192, Height: 2048, Attributes: attrs,
			IsClearDay: n%10 < 3,
		}}
	case preStitch:
		return &metadatav1.CreatePreStitchImageMetadataRequest{Metadata: &metadatav1.PreStitchImageMetadata{
			CameraId: id, CapturedAt: captured, BlobUri: "https://images.example.net/" + id + "/raw/" + stamp + "-0.jpg",
			ContentType: "image/jpeg", SizeBytes: 3_000_000 + int64(n%800_000), Width: 4056, Height: 3040, Attributes: attrs,
			PanoImageCorrelationId: "pano-" + id + "-" + at.UTC().Format("200601021504"),
		}}
	}
	return &metadatav1.CreateSingleImageMetadataRequest{Metadata: &metadatav1.SingleImageMetadata{
		CameraId: id, CapturedAt: captured, BlobUri: "https://images.example.net/" + id + "/" + stamp + ".jpg",
		ContentType: "image/jpeg", SizeBytes: 150_000 + int64(n%250_000), Width: 1920, Height: 1080, Attributes: attrs,
	}}
}

func TestCreatorEncodesTheImageAPlainRequestWould(t *testing.T) {
	f := newFleet(fleetConfig{cameras: 12, prefix: "enc-", kinds: []kind{single, pano, preStitch}}, rand.New(rand.NewPCG(3, 4)))
	c := f.creator()
	base := time.Date(2026, 12, 4, 3, 0, 0, 0, time.UTC).Add(f.offset)
	// One creator for every image in turn: a field one image sets must
	// not stay in the next one's request.
	for i := range 60 {
		k, camera, at := f.kinds[i%3], (i*7)%f.cameras, base.Add(time.Duration(i)*time.Minute)
		req, method, err := c.request(k, camera, at)
		if err != nil {
			t.Fatal(err)
		}
		want := plainRequest(f, k, camera, at)
		got := want.ProtoReflect().New().Interface()
		if err := proto.Unmarshal(req, got); err != nil {
			t.Fatalf("%s of camera %d: %v", k, camera, err)
		}
		if !proto.Equal(got, want) {
			t.Fatalf("%s of camera %d at %v:\n got %v\nwant %v", k, camera, at, got, want)
		}
		if wantMethod := map[kind]string{
			single:    metadatav1.SingleImageMetadataService_CreateSingleImageMetadata_FullMethodName,
			pano:      metadatav1.PanoImageMetadataService_CreatePanoImageMetadata_FullMethodName,
			preStitch: metadatav1.PreStitchImageMetadataService_CreatePreStitchImageMetadata_FullMethodName,
		}[k]; method != wantMethod {
			t.Fatalf("%s goes to %s", k, method)
		}
	}
}
