package server

import (
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/emptypb"
)

// TestMethodWithoutScopeStopsTheServer: a service whose RPC declares no
// required_scope option cannot be served. Its descriptor lives in a
// registry of the test's own, so the test runs any number of times.
func TestMethodWithoutScopeStopsTheServer(t *testing.T) {
	files := new(protoregistry.Files)
	if err := files.RegisterFile(emptypb.File_google_protobuf_empty_proto); err != nil {
		t.Fatal(err)
	}
	fd, err := protodesc.NewFile(&descriptorpb.FileDescriptorProto{
		Name:       proto.String("scopetest/unscoped.proto"),
		Package:    proto.String("scopetest"),
		Dependency: []string{"google/protobuf/empty.proto"},
		Syntax:     proto.String("proto3"),
		Service: []*descriptorpb.ServiceDescriptorProto{{
			Name: proto.String("Unscoped"),
			Method: []*descriptorpb.MethodDescriptorProto{{
				Name: proto.String("Purge"), InputType: proto.String(".google.protobuf.Empty"), OutputType: proto.String(".google.protobuf.Empty"),
			}},
		}},
	}, files)
	if err != nil {
		t.Fatal(err)
	}
	if err := files.RegisterFile(fd); err != nil {
		t.Fatal(err)
	}
	services := serviceInfo([]service{{desc: &grpc.ServiceDesc{ServiceName: "scopetest.Unscoped", Methods: []grpc.MethodDesc{{MethodName: "Purge"}}}}})
	_, err = methodScopes(services, false, files)
	if err == nil || !strings.Contains(err.Error(), "/scopetest.Unscoped/Purge declares no (metadata.v1.required_scope)") {
		t.Fatalf("methodScopes: %v, want the unscoped method refused", err)
	}
}
