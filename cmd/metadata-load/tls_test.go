package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// TestClientOptionsReachAnMTLSServerWithAToken runs the ceiling against a
// health server that demands a client certificate and a bearer token, as
// metadatad behind its security options does.
func TestClientOptionsReachAnMTLSServerWithAToken(t *testing.T) {
	dir := t.TempDir()
	ca, caKey := newCert(t, nil, nil, "load test CA", dir, "ca")
	serverCert, serverKey := newCert(t, ca, caKey, "metadatad.test", dir, "server")
	newCert(t, ca, caKey, "load client", dir, "client")
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("s3cret-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	srv := grpc.NewServer(
		grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{serverCert.Raw}, PrivateKey: serverKey}}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert})),
		grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
			md, _ := metadata.FromIncomingContext(ctx)
			if got := md.Get("authorization"); len(got) != 1 || got[0] != "Bearer s3cret-token" {
				return nil, status.Error(codes.Unauthenticated, "bad token")
			}
			return handler(ctx, req)
		}))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)

	tlsArgs := []string{"ceiling", "-addr", lis.Addr().String(), "-ops", "20", "-concurrency", "2",
		"-tls-ca", filepath.Join(dir, "ca.pem"), "-tls-server-name", "metadatad.test"}
	mtls := slices.Concat(tlsArgs, []string{"-tls-cert", filepath.Join(dir, "client.pem"), "-tls-key", filepath.Join(dir, "client-key.pem")})
	for _, tc := range []struct {
		name     string
		args     []string
		failCode string
	}{
		{"mTLS and token", slices.Concat(mtls, []string{"-token-file", tokenFile}), ""},
		{"wrong token", slices.Concat(mtls, []string{"-token", "guess"}), "Unauthenticated"},
		{"no client certificate", slices.Concat(tlsArgs, []string{"-token-file", tokenFile}), "Unavailable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, rep, _, stderr := runTool(t, tc.args...)
			if code != exitOK || rep.Ceiling == nil || rep.Ceiling.Calls != 20 || !rep.Config.TLS {
				t.Fatalf("exit %d (%s), report %+v", code, stderr, rep)
			}
			if tc.failCode == "" {
				requireLatencies(t, "health over mTLS", rep.Ceiling, "health_check")
				return
			}
			if got := rep.Ceiling.ErrorsByCode[tc.failCode]; got != 20 {
				t.Fatalf("errors by code %v, want 20 %s", rep.Ceiling.ErrorsByCode, tc.failCode)
			}
		})
	}
}

// newCert writes a certificate for name signed by parent (self-signed
// when nil) and its key as <file>.pem and <file>-key.pem in dir.
func newCert(t *testing.T, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, name, dir, file string) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	signer, signerKey := tmpl, key
	if parent == nil {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
	} else {
		signer, signerKey = parent, parentKey
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signerKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	if err := os.WriteFile(filepath.Join(dir, file+".pem"), certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, file+"-key.pem"), keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return cert, key
}
