package server_test

import (
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
)

// rawCodec sends a request's bytes as they are, so a test can send what no
// proto library would encode; replies decode as proto.
type rawCodec struct{ encoding.CodecV2 }

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(v.([]byte))}, nil
}

// maxErrorMessage bounds what an error may say back about a request.
const maxErrorMessage = 1024

// stringField is field 1 of wire type bytes holding value as it is.
func stringField(num protowire.Number, value []byte) []byte {
	b := protowire.AppendTag(nil, num, protowire.BytesType)
	return protowire.AppendBytes(b, value)
}

// TestMalformedRequestsAreInvalidArgument sends requests that do not decode,
// unary and streaming, over the real connection: each gets INVALID_ARGUMENT
// with a bounded message, nothing is written, and the server keeps serving.
func TestMalformedRequestsAreInvalidArgument(t *testing.T) {
	h := startServer(t, openMemPebble(t))
	huge := []byte(strings.Repeat("\xff", 1<<20))
	// metadata{camera_id: "cam-1", blob_uri: invalid UTF-8}
	badCreate := stringField(1, append(stringField(1, []byte("cam-1")), stringField(3, []byte("\xffbad"))...))
	bodies := []struct {
		name string
		body []byte
	}{
		{"invalid UTF-8 in a string", stringField(1, []byte("cam\xff\xfe"))},
		{"1 MB of invalid UTF-8", stringField(1, huge)},
		{"truncated", stringField(1, []byte("cam-1"))[:4]},
		{"length beyond the end", append(protowire.AppendTag(nil, 1, protowire.BytesType), 0x7f, 'a')},
		{"garbage", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}},
		{"invalid UTF-8 in a nested message", badCreate},
	}
	unary := []string{
		"/metadata.v1.SingleImageMetadataService/CreateSingleImageMetadata",
		"/metadata.v1.SingleImageMetadataService/GetLatestSingleImageMetadata",
		"/metadata.v1.PanoImageMetadataService/ListPanoImageMetadata",
		"/metadata.v1.RetentionService/GetPurge",
		"/metadata.v1.DeviceStateService/GetDeviceState",
	}
	raw := grpc.ForceCodecV2(rawCodec{encoding.GetCodecV2(proto.Name)})
	for _, b := range bodies {
		t.Run(b.name, func(t *testing.T) {
			for _, method := range unary {
				var reply []byte
				err := h.conn.Invoke(t.Context(), method, b.body, &reply, raw)
				requireBoundedInvalidArgument(t, err, method)
			}
			stream, err := h.conn.NewStream(t.Context(), &grpc.StreamDesc{ServerStreams: true},
				"/metadata.v1.RetentionService/WatchPurge", raw)
			requireOK(t, err, "WatchPurge")
			requireOK(t, stream.SendMsg(b.body), "send WatchPurge request")
			requireOK(t, stream.CloseSend(), "close WatchPurge send")
			var reply metadatav1.WatchPurgeResponse
			requireBoundedInvalidArgument(t, stream.RecvMsg(&reply), "WatchPurge")
		})
	}
	_, err := h.single.GetLatestSingleImageMetadata(t.Context(), &metadatav1.GetLatestSingleImageMetadataRequest{CameraId: "cam-1"})
	requireCode(t, err, codes.NotFound) // the malformed create wrote nothing
	mustCreate(t, kinds[0].client(h), sample("cam-1", minute(1)))
	requireServing(t, h, "")
}

// TestImpossibleIdentifiersAreInvalidArgument: a job id that no job can have
// (1 MB, a NUL, a '/') is INVALID_ARGUMENT naming job_id, never NOT_FOUND,
// and the message does not echo it; an unknown update_mask path of 1 MB
// is quoted cut short.
func TestImpossibleIdentifiersAreInvalidArgument(t *testing.T) {
	h := startServer(t, openMemPebble(t))
	ids := map[string]string{
		"1 MB":  strings.Repeat("a", 1<<20),
		"NUL":   "0123456789\x00abcdef0123",
		"slash": "0123456789/abcdef0123",
	}
	for name, id := range ids {
		t.Run(name, func(t *testing.T) {
			_, err := h.retention.GetPurge(t.Context(), &metadatav1.GetPurgeRequest{JobId: id})
			requireBoundedInvalidArgument(t, err, "GetPurge")
			requireFieldViolation(t, err, "job_id")
			stream, err := h.retention.WatchPurge(t.Context(), &metadatav1.WatchPurgeRequest{JobId: id})
			requireOK(t, err, "WatchPurge")
			_, err = stream.Recv()
			requireBoundedInvalidArgument(t, err, "WatchPurge")
			requireFieldViolation(t, err, "job_id")
		})
	}
	_, err := h.devices.UpdateDeviceState(t.Context(), &metadatav1.UpdateDeviceStateRequest{
		DeviceState: &metadatav1.DeviceState{DeviceId: "cam-1"}, UpdateMask: mask(strings.Repeat("x", 1<<20))})
	requireBoundedInvalidArgument(t, err, "UpdateDeviceState")
	requireFieldViolation(t, err, "update_mask.paths[0]")
}

// requireBoundedInvalidArgument fails unless err is INVALID_ARGUMENT whose
// message and details stay within maxErrorMessage.
func requireBoundedInvalidArgument(t *testing.T, err error, call string) {
	t.Helper()
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.InvalidArgument {
		t.Fatalf("%s: code %v (%.200q…), want InvalidArgument", call, st.Code(), st.Message())
	}
	if n := len(st.Message()); n > maxErrorMessage {
		t.Errorf("%s: message of %d bytes, want at most %d: %.100q…", call, n, maxErrorMessage, st.Message())
	}
	for _, d := range st.Proto().GetDetails() {
		if n := len(d.GetValue()); n > maxErrorMessage {
			t.Errorf("%s: detail of %d bytes, want at most %d", call, n, maxErrorMessage)
		}
	}
}
