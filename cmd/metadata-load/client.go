package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
)

// clientConfig is how the tool reaches a server.
type clientConfig struct {
	addr                                  string
	tls                                   bool
	caFile, certFile, keyFile, serverName string
	token, tokenFile                      string
}

// clients are the stubs of every service the workload calls, on one connection.
type clients struct {
	conn      *grpc.ClientConn
	single    metadatav1.SingleImageMetadataServiceClient
	pano      metadatav1.PanoImageMetadataServiceClient
	preStitch metadatav1.PreStitchImageMetadataServiceClient
	retention metadatav1.RetentionServiceClient
	health    healthpb.HealthClient
}

func dial(c clientConfig) (*clients, error) {
	creds, err := c.transport()
	if err != nil {
		return nil, err
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(creds)}
	token, err := c.bearerToken()
	if err != nil {
		return nil, err
	}
	if token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(bearer{token: token, secure: c.secure()}))
	}
	conn, err := grpc.NewClient(c.addr, opts...)
	if err != nil {
		return nil, err
	}
	return &clients{
		conn:      conn,
		single:    metadatav1.NewSingleImageMetadataServiceClient(conn),
		pano:      metadatav1.NewPanoImageMetadataServiceClient(conn),
		preStitch: metadatav1.NewPreStitchImageMetadataServiceClient(conn),
		retention: metadatav1.NewRetentionServiceClient(conn),
		health:    healthpb.NewHealthClient(conn),
	}, nil
}

func (c clientConfig) secure() bool {
	return c.tls || c.caFile != "" || c.certFile != "" || c.keyFile != "" || c.serverName != ""
}

func (c clientConfig) transport() (credentials.TransportCredentials, error) {
	if !c.secure() {
		return insecure.NewCredentials(), nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.serverName}
	if c.caFile != "" {
		pem, err := os.ReadFile(c.caFile)
		if err != nil {
			return nil, fmt.Errorf("-tls-ca: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("-tls-ca: no PEM certificate in %s", c.caFile)
		}
	}
	if (c.certFile == "") != (c.keyFile == "") {
		return nil, errors.New("-tls-cert and -tls-key go together")
	}
	if c.certFile != "" {
		cert, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
		if err != nil {
			return nil, fmt.Errorf("client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return credentials.NewTLS(cfg), nil
}

func (c clientConfig) bearerToken() (string, error) {
	if c.token != "" && c.tokenFile != "" {
		return "", errors.New("give -token or -token-file, not both")
	}
	if c.tokenFile == "" {
		return c.token, nil
	}
	b, err := os.ReadFile(c.tokenFile)
	if err != nil {
		return "", fmt.Errorf("-token-file: %w", err)
	}
	token := strings.TrimSpace(string(b))
	if token == "" {
		return "", fmt.Errorf("-token-file: %s is empty", c.tokenFile)
	}
	return token, nil
}

// bearer sends a token as "authorization: Bearer ..." with every call.
// Without TLS the token crosses the network in the clear, which a test or a
// local server may accept; the tool says so on stderr when it starts.
type bearer struct {
	token  string
	secure bool
}

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + b.token}, nil
}

func (b bearer) RequireTransportSecurity() bool { return b.secure }
