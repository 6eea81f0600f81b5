package tlscreds

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"time"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/tls/certprovider"
	"google.golang.org/grpc/credentials/tls/certprovider/pemfile"
	"google.golang.org/grpc/security/advancedtls"
)

// Options configures New.
type Options struct {
	// CertFile and KeyFile hold the server's certificate chain and key, PEM
	// encoded; both required.
	CertFile, KeyFile string
	// ClientCAFile, when set, holds the CA certificates client certificates
	// must chain to; every client must then present a valid one (mutual TLS).
	ClientCAFile string
	// RefreshInterval is how often the files are read again; 0 means a minute.
	RefreshInterval time.Duration
}

// Credentials are TLS server credentials that follow their files. Close
// stops reading them.
type Credentials struct {
	credentials.TransportCredentials
	identity  certprovider.Provider
	providers []certprovider.Provider
}

// New checks that the files hold a usable key pair (and CA) and returns
// credentials serving them.
func New(o Options) (*Credentials, error) {
	if o.CertFile == "" || o.KeyFile == "" {
		return nil, errors.New("tlscreds: a certificate and a key file are both required")
	}
	// The providers load in the background and would leave handshakes
	// waiting on a bad file; reading the files once here fails fast instead.
	if _, err := tls.LoadX509KeyPair(o.CertFile, o.KeyFile); err != nil {
		return nil, fmt.Errorf("tlscreds: %w", err)
	}
	if o.RefreshInterval <= 0 {
		o.RefreshInterval = time.Minute
	}
	c := &Credentials{}
	identity, err := pemfile.NewProvider(pemfile.Options{CertFile: o.CertFile, KeyFile: o.KeyFile, RefreshDuration: o.RefreshInterval})
	if err != nil {
		return nil, fmt.Errorf("tlscreds: %w", err)
	}
	c.identity = identity
	c.providers = append(c.providers, identity)
	opts := &advancedtls.Options{
		IdentityOptions:  advancedtls.IdentityCertificateOptions{IdentityProvider: identity},
		VerificationType: advancedtls.CertVerification,
		MinTLSVersion:    tls.VersionTLS12,
		MaxTLSVersion:    tls.VersionTLS13,
	}
	if o.ClientCAFile != "" {
		pem, err := os.ReadFile(o.ClientCAFile)
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("tlscreds: %w", err)
		}
		if !x509.NewCertPool().AppendCertsFromPEM(pem) {
			c.Close()
			return nil, fmt.Errorf("tlscreds: %s holds no PEM certificate", o.ClientCAFile)
		}
		roots, err := pemfile.NewProvider(pemfile.Options{RootFile: o.ClientCAFile, RefreshDuration: o.RefreshInterval})
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("tlscreds: %w", err)
		}
		c.providers = append(c.providers, roots)
		opts.RootOptions = advancedtls.RootCertificateOptions{RootProvider: roots}
		opts.RequireClientCert = true
	}
	// Wait for the first load, so the first handshake does not.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, p := range c.providers {
		if _, err := p.KeyMaterial(ctx); err != nil {
			c.Close()
			return nil, fmt.Errorf("tlscreds: loading the certificate files: %w", err)
		}
	}
	if c.TransportCredentials, err = advancedtls.NewServerCreds(opts); err != nil {
		c.Close()
		return nil, fmt.Errorf("tlscreds: %w", err)
	}
	return c, nil
}

// Certificate is the serving certificate as last read from its file, for
// the expiry gauge; nil if it cannot be had at once.
func (c *Credentials) Certificate() *x509.Certificate {
	// The first load finished in New: a later call never waits on a file.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	km, err := c.identity.KeyMaterial(ctx)
	if err != nil || len(km.Certs) == 0 || len(km.Certs[0].Certificate) == 0 {
		return nil
	}
	leaf, err := x509.ParseCertificate(km.Certs[0].Certificate[0])
	if err != nil {
		return nil
	}
	return leaf
}

// Close stops reading the files.
func (c *Credentials) Close() {
	for _, p := range c.providers {
		p.Close()
	}
}
