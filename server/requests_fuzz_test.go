package server_test

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	_ "github.com/metadatad/metadatad/gen/metadata/v1" // registers the API's descriptors
	"github.com/metadatad/metadatad/store/pebble"
)

// apiPackage is the proto package of the API; every RPC of every service in
// it is fuzzed, found through the descriptors, so a new RPC is fuzzed as
// soon as its service is generated.
const apiPackage = "metadata.v1"

// FuzzRequests sends every RPC of the API any request that decodes, over a
// real connection through the real interceptors, to a server on the
// embedded store. Whatever the request:
//   - the server answers: no panic (the recovery interceptor would turn
//     one into INTERNAL), no INTERNAL, UNKNOWN or UNIMPLEMENTED;
//   - a refusal of the request is the server's validation, INVALID_ARGUMENT
//     naming the fields at fault: an INVALID_ARGUMENT without field
//     violations comes from the store refusing what validation accepted;
//   - a create it accepts round-trips: the created metadata is the request's
//     (with the row key the server assigns and the capture time at the
//     100 ns ticks it is stored at), and its service's List reads it back
//     equal; a created named resource (a retention policy, a legal hold)
//     is what its Get reads back.
//
// Purges are not run, so nothing a fuzzed StartPurge starts deletes what a
// create wrote.
func FuzzRequests(f *testing.F) {
	db, _ := openPebble(f, pebble.Options{Dir: "db", FS: vfs.NewMem()})
	h := startServerOpts(f, db, serverOpts{})
	methods := apiMethods(f)
	for i, m := range methods {
		seeds := []proto.Message{m.input.New().Interface(), sampleRequest(m.input)}
		if m.batch {
			seeds = append(seeds, mixedBatchRequest(m.input))
		}
		for _, req := range seeds {
			body, err := proto.Marshal(req)
			if err != nil {
				f.Fatalf("%s: marshal seed: %v", m.name, err)
			}
			f.Add(uint16(i), body)
		}
	}
	f.Fuzz(func(t *testing.T, index uint16, body []byte) {
		m := methods[int(index)%len(methods)]
		req := m.input.New().Interface()
		if proto.Unmarshal(body, req) != nil {
			return // bytes that decode to no request: see TestMalformedRequests
		}
		resp, err := m.call(t.Context(), h.conn, req)
		st := status.Convert(err)
		switch st.Code() {
		case codes.OK:
			switch {
			case m.batch:
				checkBatchResults(t, h.conn, m, req, resp)
			case m.readBack != nil:
				checkRoundTrip(t, h.conn, m, field(req, "metadata").Message(), field(resp, "metadata").Message())
			case m.getBack != nil:
				checkResourceRoundTrip(t, h.conn, m, resp)
			}
		case codes.InvalidArgument:
			if !hasFieldViolations(st) {
				t.Fatalf("%s(%v): INVALID_ARGUMENT without field violations, %q: validation accepted what the store refused", m.name, req, st.Message())
			}
		case codes.Internal, codes.Unknown, codes.Unimplemented:
			t.Fatalf("%s(%v): %v", m.name, req, err)
		}
	})
}

// apiMethod is one RPC of the API.
type apiMethod struct {
	// name is the full method name, /package.Service/Method.
	name   string
	stream bool
	input  protoreflect.MessageType
	output protoreflect.MessageType
	// readBack is, for a Create or BatchCreate RPC, the List RPC of its
	// service that reads the created metadata back.
	readBack *apiMethod
	// batch marks a BatchCreate RPC: one result per image of the request.
	batch bool
	// getBack is, for the Create RPC of a named resource (AIP-133: a
	// retention policy, a legal hold), the Get RPC that reads it back.
	getBack *apiMethod
}

// apiMethods lists every RPC of the API's services, sorted by name so that
// a fuzz input's index names the same RPC on every run.
func apiMethods(tb testing.TB) []*apiMethod {
	var methods []*apiMethod
	protoregistry.GlobalFiles.RangeFilesByPackage(apiPackage, func(file protoreflect.FileDescriptor) bool {
		for i := range file.Services().Len() {
			svc := file.Services().Get(i)
			for j := range svc.Methods().Len() {
				methods = append(methods, newAPIMethod(tb, svc.Methods().Get(j)))
			}
		}
		return true
	})
	if len(methods) == 0 {
		tb.Fatalf("no RPC registered in package %s", apiPackage)
	}
	slices.SortFunc(methods, func(a, b *apiMethod) int { return strings.Compare(a.name, b.name) })
	for _, m := range methods {
		method := m.name[strings.LastIndex(m.name, "/")+1:]
		created, isBatch := strings.CutPrefix(method, "BatchCreate")
		if !isBatch && !strings.HasPrefix(method, "Create") {
			continue
		}
		m.batch = isBatch
		if !isBatch {
			created = strings.TrimPrefix(method, "Create")
		}
		service := m.name[:strings.LastIndex(m.name, "/")+1]
		if m.input.Descriptor().Fields().ByName("metadata") == nil {
			get := service + "Get" + created
			i := slices.IndexFunc(methods, func(o *apiMethod) bool { return o.name == get })
			if i < 0 {
				tb.Fatalf("%s has no %s to read its resource back: give it one, or teach FuzzRequests its round trip", m.name, get)
			}
			m.getBack = methods[i]
			continue
		}
		list := service + "List" + created
		i := slices.IndexFunc(methods, func(o *apiMethod) bool { return o.name == list })
		if i < 0 {
			tb.Fatalf("%s has no %s to read its creates back: give it one, or teach FuzzRequests its round trip", m.name, list)
		}
		m.readBack = methods[i]
	}
	return methods
}

func newAPIMethod(tb testing.TB, md protoreflect.MethodDescriptor) *apiMethod {
	if md.IsStreamingClient() {
		tb.Fatalf("%s streams requests, which FuzzRequests does not send", md.FullName())
	}
	messageType := func(d protoreflect.MessageDescriptor) protoreflect.MessageType {
		mt, err := protoregistry.GlobalTypes.FindMessageByName(d.FullName())
		if err != nil {
			tb.Fatalf("%s: %v", md.FullName(), err)
		}
		return mt
	}
	return &apiMethod{
		name:   "/" + string(md.Parent().FullName()) + "/" + string(md.Name()),
		stream: md.IsStreamingServer(),
		input:  messageType(md.Input()),
		output: messageType(md.Output()),
	}
}

// streamWait bounds how long a fuzzed stream (WatchPurge) is watched: its
// first answer or its refusal comes at once, a valid watch goes on.
const streamWait = 200 * time.Millisecond

// call sends req and returns the response, or for a server stream its
// first message. A stream still open after streamWait counts as answered.
func (m *apiMethod) call(ctx context.Context, conn *grpc.ClientConn, req proto.Message) (proto.Message, error) {
	resp := m.output.New().Interface()
	if !m.stream {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return resp, conn.Invoke(ctx, m.name, req, resp)
	}
	ctx, cancel := context.WithTimeout(ctx, streamWait)
	defer cancel()
	stream, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, m.name)
	if err == nil {
		err = stream.SendMsg(req)
	}
	if err == nil {
		err = stream.CloseSend()
	}
	if err == nil {
		err = stream.RecvMsg(resp)
	}
	if errors.Is(err, io.EOF) || status.Code(err) == codes.DeadlineExceeded {
		return resp, nil
	}
	return resp, err
}

// hasFieldViolations reports whether st carries a google.rpc.BadRequest
// naming at least one field, as the server's validation answers.
func hasFieldViolations(st *status.Status) bool {
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok && len(br.GetFieldViolations()) > 0 {
			return true
		}
	}
	return false
}

// mixedBatchRequest is a BatchCreate request of a valid image, an empty one
// and a copy of the first: one created, one refused, one found existing.
func mixedBatchRequest(mt protoreflect.MessageType) proto.Message {
	req := sampleRequest(mt).ProtoReflect()
	items := req.Mutable(req.Descriptor().Fields().ByName("metadata")).List()
	valid := items.Get(0).Message()
	items.Append(protoreflect.ValueOfMessage(valid.Type().New()))
	items.Append(protoreflect.ValueOfMessage(proto.Clone(valid.Interface()).ProtoReflect()))
	return req.Interface()
}

// checkBatchResults checks a BatchCreate's answer image by image: one
// result per image; each stored image round-trips as a Create's does; each
// refused one is refused as a Create would be, never with an internal error.
func checkBatchResults(t *testing.T, conn *grpc.ClientConn, m *apiMethod, req, resp proto.Message) {
	t.Helper()
	items, results := field(req, "metadata").List(), field(resp, "results").List()
	if items.Len() != results.Len() {
		t.Fatalf("%s: %d results for %d images", m.name, results.Len(), items.Len())
	}
	for i := range results.Len() {
		result := results.Get(i).Message().Interface()
		st := status.FromProto(field(result, "status").Message().Interface().(*spb.Status))
		switch st.Code() {
		case codes.OK:
			checkRoundTrip(t, conn, m, items.Get(i).Message(), field(result, "metadata").Message())
		case codes.InvalidArgument:
			if !hasFieldViolations(st) {
				t.Fatalf("%s image %d (%v): INVALID_ARGUMENT without field violations, %q", m.name, i, items.Get(i), st.Message())
			}
		case codes.Internal, codes.Unknown, codes.Unimplemented:
			t.Fatalf("%s image %d (%v): %v", m.name, i, items.Get(i), st.Err())
		}
	}
}

// checkRoundTrip checks that a create stored what it was asked to and that
// its service's List reads it back equal.
func checkRoundTrip(t *testing.T, conn *grpc.ClientConn, m *apiMethod, asked, created protoreflect.Message) {
	t.Helper()
	want := proto.Clone(asked.Interface()).ProtoReflect()
	dropUnknown(want)
	set(want, "row_key", field(created.Interface(), "row_key"))
	captured := field(want.Interface(), "captured_at").Message().Interface().(*timestamppb.Timestamp).AsTime()
	set(want, "captured_at", protoreflect.ValueOfMessage(timestamppb.New(captured.Truncate(100*time.Nanosecond)).ProtoReflect()))
	if fd := want.Descriptor().Fields().ByName("duration"); fd != nil {
		// A duration is kept at 100 ns ticks too, and one left unset is a
		// length of zero.
		d := field(want.Interface(), "duration").Message().Interface().(*durationpb.Duration).AsDuration()
		set(want, "duration", protoreflect.ValueOfMessage(durationpb.New(d.Truncate(100*time.Nanosecond)).ProtoReflect()))
	}
	if !proto.Equal(want.Interface(), created.Interface()) {
		t.Fatalf("%s stored %v, asked for %v", m.name, created.Interface(), want.Interface())
	}

	list := m.readBack.input.New()
	set(list, "camera_id", field(created.Interface(), "camera_id"))
	at := field(created.Interface(), "captured_at").Message().Interface().(*timestamppb.Timestamp).AsTime()
	set(list, "start_time", protoreflect.ValueOfMessage(timestamppb.New(at).ProtoReflect()))
	set(list, "end_time", protoreflect.ValueOfMessage(timestamppb.New(at.Add(100*time.Nanosecond)).ProtoReflect()))
	read, err := m.readBack.call(t.Context(), conn, list.Interface())
	if err != nil {
		t.Fatalf("%s(%v) after %s: %v", m.readBack.name, list, m.name, err)
	}
	items := field(read, "metadata").List()
	if items.Len() != 1 || !proto.Equal(items.Get(0).Message().Interface(), created.Interface()) {
		t.Fatalf("%s read back %v after %s stored %v", m.readBack.name, read, m.name, created.Interface())
	}
}

// dropUnknown clears the fields of m, and of every message in it, that its
// schema does not declare: a request may carry them (a newer client's
// fields), and the store keeps only the declared ones.
func dropUnknown(m protoreflect.Message) {
	m.SetUnknown(nil)
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsMap():
			if fd.MapValue().Message() != nil {
				v.Map().Range(func(_ protoreflect.MapKey, e protoreflect.Value) bool {
					dropUnknown(e.Message())
					return true
				})
			}
		case fd.Message() == nil:
		case fd.IsList():
			for i := range v.List().Len() {
				dropUnknown(v.List().Get(i).Message())
			}
		default:
			dropUnknown(v.Message())
		}
		return true
	})
}

// checkResourceRoundTrip reads back the resource a Create returned (its
// response's one field) by its name, and wants it as returned.
func checkResourceRoundTrip(t *testing.T, conn *grpc.ClientConn, m *apiMethod, resp proto.Message) {
	t.Helper()
	r := resp.ProtoReflect()
	created := r.Get(r.Descriptor().Fields().ByNumber(1)).Message()
	name := created.Get(created.Descriptor().Fields().ByName("name"))
	get := m.getBack.input.New()
	set(get, "name", name)
	got, err := m.getBack.call(t.Context(), conn, get.Interface())
	if err != nil {
		t.Fatalf("%s(%v) after %s: %v", m.getBack.name, get, m.name, err)
	}
	g := got.ProtoReflect()
	back := g.Get(g.Descriptor().Fields().ByNumber(1)).Message()
	if !proto.Equal(back.Interface(), created.Interface()) {
		t.Fatalf("%s returned %v, %s reads back %v", m.name, created, m.getBack.name, back)
	}
}

func field(m proto.Message, name protoreflect.Name) protoreflect.Value {
	r := m.ProtoReflect()
	return r.Get(r.Descriptor().Fields().ByName(name))
}

func set(m protoreflect.Message, name protoreflect.Name, v protoreflect.Value) {
	m.Set(m.Descriptor().Fields().ByName(name), v)
}

// sampleRequest fills every field of a request with a plausible value, a
// seed from which the fuzzer reaches valid requests of any RPC: ids are an
// id, times lie in the test's day with end after start, sizes are small.
func sampleRequest(mt protoreflect.MessageType) proto.Message {
	m := mt.New()
	fillSample(m, 0)
	return m.Interface()
}

func fillSample(m protoreflect.Message, depth int) {
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		switch {
		case fd.IsMap():
			if fd.MapKey().Kind() == protoreflect.StringKind && fd.MapValue().Kind() == protoreflect.StringKind {
				m.Mutable(fd).Map().Set(protoreflect.ValueOfString("site").MapKey(), protoreflect.ValueOfString("north"))
			}
		case fd.IsList():
			if v, ok := sampleValue(m, fd, depth); ok {
				m.Mutable(fd).List().Append(v)
			}
		default:
			if v, ok := sampleValue(m, fd, depth); ok {
				m.Set(fd, v)
			}
		}
	}
}

func sampleValue(parent protoreflect.Message, fd protoreflect.FieldDescriptor, depth int) (protoreflect.Value, bool) {
	name := string(fd.Name())
	switch fd.Kind() {
	case protoreflect.StringKind:
		switch {
		case name == "page_token" || name == "resume_token" || name == "etag" || name == "row_key":
			return protoreflect.Value{}, false
		case strings.HasSuffix(name, "_id") || strings.HasSuffix(name, "_ids"):
			return protoreflect.ValueOfString("cam-1"), true
		}
		return protoreflect.ValueOfString("x"), true
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(true), true
	case protoreflect.Int32Kind:
		return protoreflect.ValueOfInt32(10), true
	case protoreflect.Int64Kind:
		return protoreflect.ValueOfInt64(1024), true
	case protoreflect.EnumKind:
		if values := fd.Enum().Values(); values.Len() > 1 {
			return protoreflect.ValueOfEnum(values.Get(1).Number()), true
		}
		return protoreflect.Value{}, false
	case protoreflect.MessageKind:
		switch fd.Message().FullName() {
		case "google.protobuf.Timestamp":
			at := base.Add(time.Minute)
			if strings.HasPrefix(name, "end") || strings.HasSuffix(name, "end_time") {
				at = base.Add(time.Hour)
			}
			return protoreflect.ValueOfMessage(timestamppb.New(at).ProtoReflect()), true
		case "google.protobuf.Duration":
			return protoreflect.ValueOfMessage(durationpb.New(time.Minute).ProtoReflect()), true
		}
		if depth > 3 || fd.Message().FullName().Parent() != apiPackage {
			return protoreflect.Value{}, false
		}
		var child protoreflect.Message
		if fd.IsList() {
			child = parent.Mutable(fd).List().NewElement().Message()
		} else {
			child = parent.NewField(fd).Message()
		}
		fillSample(child, depth+1)
		return protoreflect.ValueOfMessage(child), true
	}
	return protoreflect.Value{}, false
}
