package grpcclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// Config is how a tool reaches a server.
type Config struct {
	// Addr is the server's address, host:port.
	Addr string
	// TLS turns on TLS with the system's CAs; any of the files below does too.
	TLS                                   bool
	CAFile, CertFile, KeyFile, ServerName string
	// Token, or the content of TokenFile, goes with every call as a bearer token.
	Token, TokenFile string
}

// RegisterFlags adds the TLS and token flags to fs: -tls, -tls-ca,
// -tls-cert, -tls-key, -tls-server-name, -token and -token-file. The
// address flag is the tool's own.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.CAFile, "tls-ca", "", "PEM file of the CA that signed the server's certificate; turns on TLS")
	fs.StringVar(&c.CertFile, "tls-cert", "", "PEM client certificate, for mTLS (with -tls-key)")
	fs.StringVar(&c.KeyFile, "tls-key", "", "PEM key of -tls-cert")
	fs.StringVar(&c.ServerName, "tls-server-name", "", "name to verify in the server's certificate (default the host of the server's address)")
	fs.BoolVar(&c.TLS, "tls", false, "use TLS with the system's CAs (implied by the other -tls flags)")
	fs.StringVar(&c.Token, "token", "", "bearer token sent with every call")
	fs.StringVar(&c.TokenFile, "token-file", "", "file holding the bearer token")
}

// Secure reports whether the connection uses TLS.
func (c Config) Secure() bool {
	return c.TLS || c.CAFile != "" || c.CertFile != "" || c.KeyFile != "" || c.ServerName != ""
}

// SendsToken reports whether calls carry a bearer token.
func (c Config) SendsToken() bool { return c.Token != "" || c.TokenFile != "" }

// Dial makes a client connection to c.Addr with c's transport and token,
// and opts.
func (c Config) Dial(opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	creds, err := c.transport()
	if err != nil {
		return nil, err
	}
	opts = append(opts, grpc.WithTransportCredentials(creds))
	token, err := c.bearerToken()
	if err != nil {
		return nil, err
	}
	if token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(bearer{token: token, secure: c.Secure()}))
	}
	if !c.Secure() {
		opts = append(opts, grpc.WithChainUnaryInterceptor(hintUnary), grpc.WithChainStreamInterceptor(hintStream))
	}
	return grpc.NewClient(c.Addr, opts...)
}

// tlsHint is what a plaintext call's failure adds when the server closed
// the connection before its HTTP/2 preface: what a TLS server does with a
// plaintext client's first bytes, which grpc-go reports as "error reading
// server preface: EOF" and names no cause.
const tlsHint = " (the server closed the plaintext connection at once: it may serve TLS; give -tls, or -tls-ca with the CA that signed its certificate)"

func withTLSHint(err error) error {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.Unavailable || !strings.Contains(st.Message(), "server preface") {
		return err
	}
	return status.Error(codes.Unavailable, st.Message()+tlsHint)
}

func hintUnary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	return withTLSHint(invoker(ctx, method, req, reply, cc, opts...))
}

func hintStream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	s, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil {
		return nil, withTLSHint(err)
	}
	return hintedStream{s}, nil
}

// hintedStream adds the hint to a stream's failure, which a stream reports
// when it first receives.
type hintedStream struct{ grpc.ClientStream }

func (s hintedStream) RecvMsg(m any) error { return withTLSHint(s.ClientStream.RecvMsg(m)) }

func (c Config) transport() (credentials.TransportCredentials, error) {
	if !c.Secure() {
		return insecure.NewCredentials(), nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.ServerName}
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("-tls-ca: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("-tls-ca: no PEM certificate in %s", c.CAFile)
		}
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		return nil, errors.New("-tls-cert and -tls-key go together")
	}
	if c.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return credentials.NewTLS(cfg), nil
}

func (c Config) bearerToken() (string, error) {
	if c.Token != "" && c.TokenFile != "" {
		return "", errors.New("give -token or -token-file, not both")
	}
	if c.TokenFile == "" {
		return c.Token, nil
	}
	b, err := os.ReadFile(c.TokenFile)
	if err != nil {
		return "", fmt.Errorf("-token-file: %w", err)
	}
	token := strings.TrimSpace(string(b))
	if token == "" {
		return "", fmt.Errorf("-token-file: %s is empty", c.TokenFile)
	}
	return token, nil
}

// bearer sends a token as "authorization: Bearer ..." with every call.
// Without TLS the token crosses the network in the clear, which a test or a
// local server may accept; the tools say so on stderr when they start.
type bearer struct {
	token  string
	secure bool
}

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + b.token}, nil
}

func (b bearer) RequireTransportSecurity() bool { return b.secure }
