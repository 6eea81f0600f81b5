package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/metadatad/metadatad/server/auth"
	"github.com/metadatad/metadatad/server/tlscreds"
)

// securityConfig is who may call the server and what they may do.
type securityConfig struct {
	tokenFile  string
	jwksURL    string
	jwksFile   string
	issuer     string
	audience   string
	reflection string

	tlsCert, tlsKey, tlsClientCA string
	tlsReload                    time.Duration
	insecure                     bool
	allowUnauthenticated         bool
}

// unauthenticatedWarningInterval is how often a server that lets anyone call
// everything says so again: the warning at start is gone from logs kept
// for less time than the process runs.
const unauthenticatedWarningInterval = time.Hour

func (s *securityConfig) register(fs *flag.FlagSet) {
	fs.StringVar(&s.tokenFile, "auth-token-file", "", "static bearer tokens, one a line: token,principal,scope scope ... (an empty token grants the scopes to the client certificate named principal); read again when it changes")
	fs.StringVar(&s.jwksURL, "auth-jwks-url", "", "accept JWT bearer tokens signed by a key of this JWKS, e.g. https://login.microsoftonline.com/TENANT/discovery/v2.0/keys; refreshed in the background")
	fs.StringVar(&s.jwksFile, "auth-jwks-file", "", "accept JWT bearer tokens signed by a key of this JWKS file (instead of -auth-jwks-url); read again when it changes")
	fs.StringVar(&s.issuer, "auth-issuer", "", "with JWTs: the iss they must carry")
	fs.StringVar(&s.audience, "auth-audience", "", "with JWTs: the aud they must include")
	fs.StringVar(&s.reflection, "reflection", "auth", "who may use gRPC reflection: auth (callers with metadata.read) or open (anyone)")
	fs.StringVar(&s.tlsCert, "tls-cert", "", "serve TLS with this PEM certificate chain (with -tls-key); read again when it changes")
	fs.StringVar(&s.tlsKey, "tls-key", "", "the PEM private key of -tls-cert")
	fs.StringVar(&s.tlsClientCA, "tls-client-ca", "", "require client certificates issued by these PEM CA certificates (mutual TLS); read again when it changes")
	fs.DurationVar(&s.tlsReload, "tls-reload-interval", time.Minute, "how often the TLS files are read again")
	fs.BoolVar(&s.insecure, "insecure", false, "allow plaintext on a non-loopback -listen address (e.g. behind a mesh that encrypts)")
	fs.BoolVar(&s.allowUnauthenticated, "allow-unauthenticated", false, "allow a non-loopback -listen address without -auth-token-file or JWTs, where every caller may call everything, Backup and StartPurge included (e.g. behind a proxy that authenticates); logged as a warning at start and hourly")
}

func (s *securityConfig) check(listen string) error {
	jwt := s.jwksURL != "" || s.jwksFile != "" || s.issuer != "" || s.audience != ""
	switch {
	case (s.tlsCert == "") != (s.tlsKey == ""):
		return fmt.Errorf("-tls-cert and -tls-key go together")
	case s.tlsClientCA != "" && s.tlsCert == "":
		return fmt.Errorf("-tls-client-ca needs -tls-cert and -tls-key: client certificates are checked in a TLS handshake")
	case s.tlsCert == "" && !s.insecure && !loopback(listen):
		return fmt.Errorf("refusing to serve plaintext on %s, which is not a loopback address: anyone on the network could read tokens and data. "+
			"Give -tls-cert and -tls-key, listen on localhost, or pass -insecure if something else encrypts the traffic", listen)
	case s.jwksURL != "" && s.jwksFile != "":
		return fmt.Errorf("give -auth-jwks-url or -auth-jwks-file, not both")
	case jwt && (s.jwksURL == "" && s.jwksFile == "" || s.issuer == "" || s.audience == ""):
		return fmt.Errorf("JWT authentication needs -auth-jwks-url (or -auth-jwks-file), -auth-issuer and -auth-audience together")
	case s.reflection != "auth" && s.reflection != "open":
		return fmt.Errorf("-reflection must be auth or open, not %q", s.reflection)
	case !s.authenticates() && !s.allowUnauthenticated && !loopback(listen):
		certificates := ""
		if s.tlsClientCA != "" {
			certificates = " (with -tls-client-ca, a token file line with an empty token grants a certificate's identity its scopes)"
		}
		return fmt.Errorf("refusing to serve %s without authentication: every caller would be anonymous holding every scope, Backup of the whole database and StartPurge included. "+
			"Give -auth-token-file%s or -auth-jwks-url (or -auth-jwks-file) with -auth-issuer and -auth-audience, listen on localhost, "+
			"or pass -allow-unauthenticated if something in front authenticates every caller", listen, certificates)
	}
	return nil
}

// warnUnauthenticated logs, when the server lets every caller call
// everything by -allow-unauthenticated, a warning saying so now and every
// unauthenticatedWarningInterval until ctx ends.
func (s *securityConfig) warnUnauthenticated(ctx context.Context, log *slog.Logger, addr string) {
	if s.authenticates() || !s.allowUnauthenticated {
		return
	}
	warn := func() {
		log.Warn("serving without authentication (-allow-unauthenticated): every caller is anonymous holding every scope, Backup and StartPurge included", "addr", addr)
	}
	warn()
	go func() {
		t := time.NewTicker(unauthenticatedWarningInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				warn()
			}
		}
	}()
}

// loopback reports whether a listen address only accepts connections from
// this machine.
func loopback(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// credentials are the server's TLS credentials, nil for plaintext.
func (s *securityConfig) credentials() (*tlscreds.Credentials, error) {
	if s.tlsCert == "" {
		return nil, nil
	}
	return tlscreds.New(tlscreds.Options{CertFile: s.tlsCert, KeyFile: s.tlsKey, ClientCAFile: s.tlsClientCA, RefreshInterval: s.tlsReload})
}

// authenticates reports whether callers must authenticate.
func (s *securityConfig) authenticates() bool {
	return s.tokenFile != "" || s.jwksURL != "" || s.jwksFile != ""
}

// authenticator is how the server authenticates its callers; nil when it
// does not. Its reloads run until ctx ends.
func (s *securityConfig) authenticator(ctx context.Context, log *slog.Logger) (*auth.Authenticator, error) {
	if !s.authenticates() {
		return nil, nil
	}
	o := auth.Options{TokenFile: s.tokenFile, ClientCertificates: s.tlsClientCA != "", Logger: log}
	if s.jwksURL != "" || s.jwksFile != "" {
		o.JWT = &auth.JWTOptions{JWKSURL: s.jwksURL, JWKSFile: s.jwksFile, Issuer: s.issuer, Audience: s.audience}
	}
	return auth.New(ctx, o)
}
