package grpcclient_test

import (
	"context"
	"crypto/tls"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/metadatad/metadatad/internal/grpcclient"
	"github.com/metadatad/metadatad/internal/testcerts"
)

// serve starts a health server on 127.0.0.1, with TLS when creds is set,
// and returns its address.
func serve(t *testing.T, opts ...grpc.ServerOption) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(opts...)
	healthpb.RegisterHealthServer(s, health.NewServer())
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	return lis.Addr().String()
}

// check calls the health service at addr with a plaintext client, once
// by a unary call and once by a stream (what backup -server reads).
func check(t *testing.T, addr string) (unary, stream error) {
	t.Helper()
	conn, err := grpcclient.Config{Addr: addr}.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	health := healthpb.NewHealthClient(conn)
	_, unary = health.Check(ctx, &healthpb.HealthCheckRequest{})
	watch, err := health.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err == nil {
		_, err = watch.Recv()
	}
	return unary, err
}

// TestAPlaintextClientOfATLSServerIsToldSo: a TLS server closes a
// plaintext client's connection at once, which grpc-go reports as "error
// reading server preface: EOF"; the tools' client says what it likely
// means and which flag to give. A plaintext server is reached as before.
func TestAPlaintextClientOfATLSServerIsToldSo(t *testing.T) {
	ca := testcerts.NewAuthority(t, "test CA")
	certPEM, keyPEM := ca.Server(t, "server")
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	tlsAddr := serve(t, grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12})))
	unary, stream := check(t, tlsAddr)
	for what, err := range map[string]error{"call": unary, "stream": stream} {
		if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "-tls") {
			t.Errorf("a plaintext %s to a TLS server: %v; want UNAVAILABLE naming -tls", what, err)
		}
	}
	if unary, stream := check(t, serve(t)); unary != nil || stream != nil {
		t.Fatalf("a plaintext call and stream to a plaintext server: %v, %v", unary, stream)
	}
}
