package tlscreds_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/metadatad/metadatad/internal/testcerts"
	"github.com/metadatad/metadatad/internal/testwait"
	"github.com/metadatad/metadatad/server/tlscreds"
)

// TestNewRefusesBadFiles: a server never starts with files it could not
// serve, and says which.
func TestNewRefusesBadFiles(t *testing.T) {
	dir := t.TempDir()
	ca := testcerts.NewAuthority(t, "CA")
	crt, key := ca.Server(t, "server")
	_, otherKey := ca.Server(t, "other")
	files := map[string][]byte{"server.crt": crt, "server.key": key, "other.key": otherKey, "ca.crt": ca.PEM, "empty.crt": []byte("not PEM\n")}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	path := func(name string) string { return filepath.Join(dir, name) }
	for _, tc := range []struct {
		name string
		o    tlscreds.Options
		want string
	}{
		{"no key", tlscreds.Options{CertFile: path("server.crt")}, "both required"},
		{"missing certificate", tlscreds.Options{CertFile: path("missing.crt"), KeyFile: path("server.key")}, "missing.crt"},
		{"key of another certificate", tlscreds.Options{CertFile: path("server.crt"), KeyFile: path("other.key")}, "private key does not match"},
		{"client CA without certificates", tlscreds.Options{CertFile: path("server.crt"), KeyFile: path("server.key"), ClientCAFile: path("empty.crt")}, "holds no PEM certificate"},
		{"missing client CA", tlscreds.Options{CertFile: path("server.crt"), KeyFile: path("server.key"), ClientCAFile: path("missing-ca.crt")}, "missing-ca.crt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := tlscreds.New(tc.o)
			if err == nil {
				c.Close()
				t.Fatal("New succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
		})
	}
	c, err := tlscreds.New(tlscreds.Options{CertFile: path("server.crt"), KeyFile: path("server.key"), ClientCAFile: path("ca.crt")})
	if err != nil {
		t.Fatalf("good files: %v", err)
	}
	c.Close()
}

// TestCertificateFollowsItsFile: the certificate the expiry gauge reads is
// the one on disk, also after a rotation.
func TestCertificateFollowsItsFile(t *testing.T) {
	dir := t.TempDir()
	ca := testcerts.NewAuthority(t, "CA")
	write := func(cn string) {
		crt, key := ca.Server(t, cn)
		for name, content := range map[string][]byte{"server.crt": crt, "server.key": key} {
			if err := os.WriteFile(filepath.Join(dir, name), content, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	write("first")
	c, err := tlscreds.New(tlscreds.Options{CertFile: filepath.Join(dir, "server.crt"), KeyFile: filepath.Join(dir, "server.key"), RefreshInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := c.Certificate(); got == nil || got.Subject.CommonName != "first" {
		t.Fatalf("certificate %v, want the one named first", got)
	}
	write("rotated")
	testwait.Until(t, 10*time.Second, func() error {
		if got := c.Certificate(); got == nil || got.Subject.CommonName != "rotated" {
			return fmt.Errorf("certificate %v after the rotation, want the one named rotated", got)
		}
		return nil
	})
}
