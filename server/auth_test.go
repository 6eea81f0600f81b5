package server_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/emptypb"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
	"github.com/metadatad/metadatad/server/auth"
)

// Tokens of the token file startAuthServer serves: for each scope, one
// token holding only it and one holding every other scope.
func onlyToken(scope string) string   { return "tok-only-" + scope }
func allButToken(scope string) string { return "tok-all-but-" + scope }

// startAuthServer serves on the embedded store with a static token file
// (see onlyToken and allButToken, plus "cron-secret" for the principal
// cron holding retention.admin).
func startAuthServer(t *testing.T, openReflection bool) *harness {
	t.Helper()
	var lines []string
	for _, s := range auth.Scopes {
		others := slices.DeleteFunc(slices.Clone(auth.Scopes), func(o string) bool { return o == s })
		lines = append(lines, onlyToken(s)+",only-"+s+","+s, allButToken(s)+",all-but-"+s+","+strings.Join(others, " "))
	}
	lines = append(lines, "cron-secret,cron,retention.admin")
	return startServerOpts(t, openMemPebble(t), serverOpts{auth: newTokenAuth(t, strings.Join(lines, "\n")), openReflection: openReflection})
}

// newTokenAuth authenticates with a token file holding content.
func newTokenAuth(t *testing.T, content string) *auth.Authenticator {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := auth.New(t.Context(), auth.Options{TokenFile: path, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("auth.New: %v", err)
	}
	return a
}

func bearer(ctx context.Context, token string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
}

// expectedScope is the scope an RPC's name says it needs. An RPC that fits
// no rule fails the test: its scope has to be decided, here and in its proto.
func expectedScope(t *testing.T, service, method string) string {
	t.Helper()
	switch {
	case service == metadatav1.RetentionService_ServiceDesc.ServiceName:
		return auth.ScopeRetentionAdmin
	case service == metadatav1.AdminService_ServiceDesc.ServiceName:
		return auth.ScopeAdmin
	case strings.HasPrefix(method, "Delete"):
		return auth.ScopeDelete
	case strings.HasPrefix(method, "Create"), strings.HasPrefix(method, "BatchCreate"), strings.HasPrefix(method, "Record"), strings.HasPrefix(method, "Update"):
		return auth.ScopeWrite
	case strings.HasPrefix(method, "Get"), strings.HasPrefix(method, "BatchGet"), strings.HasPrefix(method, "List"), strings.HasPrefix(method, "Watch"):
		return auth.ScopeRead
	}
	t.Fatalf("/%s/%s: no rule says which scope it needs", service, method)
	return ""
}

// registeredMethods lists the methods the server serves, as its reflection
// service reports them, outside health and reflection.
func registeredMethods(t *testing.T, h *harness) []protoreflect.MethodDescriptor {
	t.Helper()
	stream, err := reflectionv1.NewServerReflectionClient(h.conn).ServerReflectionInfo(bearer(t.Context(), onlyToken(auth.ScopeRead)))
	requireOK(t, err, "reflection")
	requireOK(t, stream.Send(&reflectionv1.ServerReflectionRequest{MessageRequest: &reflectionv1.ServerReflectionRequest_ListServices{}}), "list services")
	resp, err := stream.Recv()
	requireOK(t, err, "list services")
	var methods []protoreflect.MethodDescriptor
	for _, svc := range resp.GetListServicesResponse().GetService() {
		if !strings.HasPrefix(svc.GetName(), "metadata.") {
			continue
		}
		d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(svc.GetName()))
		requireOK(t, err, svc.GetName())
		ms := d.(protoreflect.ServiceDescriptor).Methods()
		for i := range ms.Len() {
			methods = append(methods, ms.Get(i))
		}
	}
	if len(methods) < 25 {
		t.Fatalf("reflection lists %d methods, want every service's", len(methods))
	}
	return methods
}

// call invokes method with an empty request, decoding any answer as an
// empty message: enough to see whether the guard let it through.
func call(ctx context.Context, conn *grpc.ClientConn, m protoreflect.MethodDescriptor) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	name := "/" + string(m.Parent().FullName()) + "/" + string(m.Name())
	if !m.IsStreamingServer() {
		return conn.Invoke(ctx, name, &emptypb.Empty{}, &emptypb.Empty{})
	}
	stream, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, name)
	if err != nil {
		return err
	}
	if err := stream.SendMsg(&emptypb.Empty{}); err != nil {
		return err
	}
	if err := stream.CloseSend(); err != nil {
		return err
	}
	return stream.RecvMsg(&emptypb.Empty{})
}

// TestEveryRPCNeedsItsScope calls every RPC the server registers with a
// token holding every scope but the one it needs (PERMISSION_DENIED naming
// that scope), with one holding only that scope (let through), and with no
// token (UNAUTHENTICATED).
func TestEveryRPCNeedsItsScope(t *testing.T) {
	h := startAuthServer(t, false)
	for _, m := range registeredMethods(t, h) {
		service, method := string(m.Parent().FullName()), string(m.Name())
		t.Run(service+"/"+method, func(t *testing.T) {
			scope := expectedScope(t, service, method)
			st := requireCode(t, call(bearer(t.Context(), allButToken(scope)), h.conn, m), codes.PermissionDenied)
			if !strings.Contains(st.Message(), "needs scope "+scope) {
				t.Errorf("PERMISSION_DENIED %q does not name scope %s", st.Message(), scope)
			}
			err := call(bearer(t.Context(), onlyToken(scope)), h.conn, m)
			if c := status.Code(err); c == codes.PermissionDenied || c == codes.Unauthenticated {
				t.Errorf("with scope %s: %v", scope, err)
			}
			requireCode(t, call(t.Context(), h.conn, m), codes.Unauthenticated)
		})
	}
}

func TestAuthentication(t *testing.T) {
	h := startAuthServer(t, false)
	get := func(ctx context.Context) error {
		_, err := h.retention.ListPurges(ctx, &metadatav1.ListPurgesRequest{})
		return err
	}
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want codes.Code
	}{
		{"no token", t.Context(), codes.Unauthenticated},
		{"unknown token", bearer(t.Context(), "guessed"), codes.Unauthenticated},
		{"malformed header", metadata.AppendToOutgoingContext(t.Context(), "authorization", "cron-secret"), codes.Unauthenticated},
		{"other scheme", metadata.AppendToOutgoingContext(t.Context(), "authorization", "Basic cron-secret"), codes.Unauthenticated},
		{"wrong scope", bearer(t.Context(), onlyToken(auth.ScopeRead)), codes.PermissionDenied},
		{"right scope", bearer(t.Context(), "cron-secret"), codes.OK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := status.Code(get(tc.ctx)); got != tc.want {
				t.Fatalf("code %v, want %v", got, tc.want)
			}
		})
	}
	logs := h.logs.String()
	if !strings.Contains(logs, "principal=cron ") {
		t.Errorf("no log line names the principal cron:\n%s", logs)
	}
	if !strings.Contains(logs, "principal=- ") {
		t.Errorf("no log line for a call without a principal:\n%s", logs)
	}
	for _, secret := range []string{"cron-secret", "guessed", onlyToken(auth.ScopeRead)} {
		if strings.Contains(logs, secret) {
			t.Errorf("a log line holds the token %q:\n%s", secret, logs)
		}
	}
}

func TestHealthAndReflectionAccess(t *testing.T) {
	listServices := func(ctx context.Context, conn *grpc.ClientConn) error {
		stream, err := reflectionv1.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
		if err != nil {
			return err
		}
		// A refused stream may end before the request is sent: Send then
		// says io.EOF, and Recv gives the status.
		if err := stream.Send(&reflectionv1.ServerReflectionRequest{MessageRequest: &reflectionv1.ServerReflectionRequest_ListServices{}}); err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		_, err = stream.Recv()
		return err
	}
	h := startAuthServer(t, false)
	resp, err := healthpb.NewHealthClient(h.conn).Check(t.Context(), &healthpb.HealthCheckRequest{})
	requireOK(t, err, "health check without a token")
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("health %v, want SERVING", resp.GetStatus())
	}
	requireCode(t, listServices(t.Context(), h.conn), codes.Unauthenticated)
	requireCode(t, listServices(bearer(t.Context(), allButToken(auth.ScopeRead)), h.conn), codes.PermissionDenied)
	requireOK(t, listServices(bearer(t.Context(), onlyToken(auth.ScopeRead)), h.conn), "reflection with metadata.read")

	open := startAuthServer(t, true)
	requireOK(t, listServices(t.Context(), open.conn), "open reflection without a token")
}
