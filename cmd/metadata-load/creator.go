package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
)

// creator writes the fleet's images for one worker, as cheaply as the
// tool can: it shares its machine with the server it measures, and what it
// spends is taken from the server. Its messages are reused from call to
// call; the attributes, a map proto encodes slowly, are appended as bytes
// encoded once per camera (proto's encoding of a message is the
// concatenation of its fields', so the result is the image's own); and a
// create's response, the stored image, is not decoded, as the tool reads
// nothing of it.
type creator struct {
	fleet     *fleet
	single    metadatav1.SingleImageMetadata
	pano      metadatav1.PanoImageMetadata
	preStitch metadatav1.PreStitchImageMetadata
	captured  timestamppb.Timestamp
	buf, text []byte
}

// encodedAttrs are a fleet's attributes in wire form, for one image type:
// each camera's fixed ones, and each value of the two that vary.
type encodedAttrs struct {
	cameras   [][]byte
	exposures [len(exposures)][]byte
	isos      [len(isos)][]byte
}

// The two varying attributes take one of these values.
var (
	exposures = func() (out [30]string) {
		for i := range out {
			out[i] = strconv.Itoa(2 + i)
		}
		return out
	}()
	isos = [4]string{"100", "200", "400", "800"}
)

// createField is the number of the image field of each type's create
// request, from the descriptors rather than a second copy of the schema.
var createField = map[kind]protowire.Number{
	single:    metadataField(&metadatav1.CreateSingleImageMetadataRequest{}),
	pano:      metadataField(&metadatav1.CreatePanoImageMetadataRequest{}),
	preStitch: metadataField(&metadatav1.CreatePreStitchImageMetadataRequest{}),
}

func metadataField(m proto.Message) protowire.Number {
	return m.ProtoReflect().Descriptor().Fields().ByName("metadata").Number()
}

// encodeAttrs is attrs in the wire form of an image of kind k.
func encodeAttrs(k kind, attrs map[string]string) []byte {
	var m proto.Message
	switch k {
	case single:
		m = &metadatav1.SingleImageMetadata{Attributes: attrs}
	case pano:
		m = &metadatav1.PanoImageMetadata{Attributes: attrs}
	case preStitch:
		m = &metadatav1.PreStitchImageMetadata{Attributes: attrs}
	}
	b, err := proto.Marshal(m)
	if err != nil {
		panic(fmt.Sprintf("encoding attributes: %v", err)) // a map of strings always encodes
	}
	return b
}

// encodeFleetAttrs encodes every camera's attributes for each of the
// fleet's image types.
func (f *fleet) encodeFleetAttrs() {
	f.encoded = map[kind]*encodedAttrs{}
	for _, k := range f.kinds {
		e := &encodedAttrs{}
		for _, attrs := range f.attrs {
			e.cameras = append(e.cameras, encodeAttrs(k, attrs))
		}
		for i, v := range exposures {
			e.exposures[i] = encodeAttrs(k, map[string]string{"exposure_ms": v})
		}
		for i, v := range isos {
			e.isos[i] = encodeAttrs(k, map[string]string{"iso": v})
		}
		f.encoded[k] = e
	}
}

func (f *fleet) creator() *creator {
	c := &creator{fleet: f}
	c.single = metadatav1.SingleImageMetadata{ContentType: "image/jpeg", Width: 1920, Height: 1080}
	c.pano = metadatav1.PanoImageMetadata{ContentType: "image/jpeg", Width: 8192, Height: 2048}
	c.preStitch = metadatav1.PreStitchImageMetadata{ContentType: "image/jpeg", Width: 4056, Height: 3040}
	return c
}

// create writes the image of kind k that camera captured at.
func (c *creator) create(ctx context.Context, cl *clients, k kind, camera int, at time.Time) error {
	req, method, err := c.request(k, camera, at)
	if err != nil {
		return err
	}
	return cl.conn.Invoke(ctx, method, req, &discarded, grpc.ForceCodecV2(encodedCodec{}))
}

// request is the encoded create request of the image of kind k that
// camera captured at, and the method it goes to.
func (c *creator) request(k kind, camera int, at time.Time) (encodedRequest, string, error) {
	f := c.fleet
	id := f.ids[camera]
	n := noise(camera, at, k)
	c.captured.Seconds, c.captured.Nanos = at.Unix(), int32(at.Nanosecond())
	var m proto.Message
	var method string
	switch k {
	case single:
		c.single.CameraId, c.single.CapturedAt = id, &c.captured
		c.single.BlobUri = c.blobURI(id, "/", at, ".jpg")
		c.single.SizeBytes = 150_000 + int64(n%250_000)
		m, method = &c.single, metadatav1.SingleImageMetadataService_CreateSingleImageMetadata_FullMethodName
	case pano:
		c.pano.CameraId, c.pano.CapturedAt = id, &c.captured
		c.pano.BlobUri = c.blobURI(id, "/pano/", at, ".jpg")
		c.pano.SizeBytes = 2_000_000 + int64(n%1_500_000)
		c.pano.IsClearDay = n%10 < 3
		m, method = &c.pano, metadatav1.PanoImageMetadataService_CreatePanoImageMetadata_FullMethodName
	case preStitch:
		c.preStitch.CameraId, c.preStitch.CapturedAt = id, &c.captured
		c.preStitch.BlobUri = c.blobURI(id, "/raw/", at, "-0.jpg")
		c.preStitch.SizeBytes = 3_000_000 + int64(n%800_000)
		c.text = append(append(append(c.text[:0], "pano-"...), id...), '-')
		c.preStitch.PanoImageCorrelationId = string(at.UTC().AppendFormat(c.text, "200601021504"))
		m, method = &c.preStitch, metadatav1.PreStitchImageMetadataService_CreatePreStitchImageMetadata_FullMethodName
	default:
		return nil, "", fmt.Errorf("unknown image type %d", k)
	}
	var err error
	if c.buf, err = (proto.MarshalOptions{}).MarshalAppend(c.buf[:0], m); err != nil {
		return nil, "", err
	}
	e := f.encoded[k]
	c.buf = append(append(append(c.buf, e.cameras[camera]...), e.exposures[n%uint64(len(exposures))]...), e.isos[n>>8%uint64(len(isos))]...)
	// A fresh slice for gRPC, which may still hold the request after the
	// call returns on an error.
	field := createField[k]
	req := make([]byte, 0, protowire.SizeTag(field)+protowire.SizeBytes(len(c.buf)))
	req = protowire.AppendTag(req, field, protowire.BytesType)
	return protowire.AppendBytes(req, c.buf), method, nil
}

// blobURI is where the image's blob would be: the camera's directory, the
// kind's part, the capture minute and the suffix.
func (c *creator) blobURI(id, part string, at time.Time, suffix string) string {
	c.text = append(append(append(c.text[:0], "https://images.example.net/"...), id...), part...)
	c.text = append(at.UTC().AppendFormat(c.text, "2006/01/02/1504"), suffix...)
	return string(c.text)
}

// encodedRequest is a request message already in wire form.
type encodedRequest []byte

// discarded takes every create's response.
var discarded struct{}

// encodedCodec sends an encodedRequest as it is and drops the response
// undecoded. Its name is proto's, so the server reads what it sends as
// the protobuf it is.
type encodedCodec struct{}

func (encodedCodec) Marshal(v any) (mem.BufferSlice, error) {
	b, ok := v.(encodedRequest)
	if !ok {
		return nil, fmt.Errorf("encodedCodec sends encoded requests, not %T", v)
	}
	return mem.BufferSlice{mem.SliceBuffer(b)}, nil
}

func (encodedCodec) Unmarshal(mem.BufferSlice, any) error { return nil }

func (encodedCodec) Name() string { return "proto" }
