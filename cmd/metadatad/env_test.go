package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/metadatad/metadatad/internal/testcerts"
)

// TestCommandVariablesStayWithTheirCommand: a command run beside a
// plaintext server in its environment, METADATAD_TLS_CERT and _KEY
// included, dials it in plaintext (its own connection's variables are
// METADATAD_CLIENT_*, which do turn TLS on); a command's own flag is read
// from its qualified variable, and from the old unqualified one for one
// release with a warning.
func TestCommandVariablesStayWithTheirCommand(t *testing.T) {
	d := startDaemon(t, t.TempDir())
	dir := t.TempDir()
	ca := testcerts.NewAuthority(t, "metadatad test CA")
	cert, key := ca.Server(t, "localhost")
	files := map[string][]byte{"tls.crt": cert, "tls.key": key, "ca.crt": ca.PEM}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	serverTLS := []string{"METADATAD_TLS_CERT=" + filepath.Join(dir, "tls.crt"), "METADATAD_TLS_KEY=" + filepath.Join(dir, "tls.key")}
	for _, tc := range []struct {
		name        string
		env         []string
		code        int
		stderr, not []string
	}{
		{name: "the server's TLS variables", env: append([]string{"METADATAD_BACKUP_TO=" + filepath.Join(dir, "a")}, serverTLS...),
			not: []string{"TLS", "tls", "METADATAD"}},
		{name: "the old unqualified variable", env: []string{"METADATAD_TO=" + filepath.Join(dir, "b")},
			stderr: []string{"metadatad backup: $METADATAD_TO is read for this release only: set $METADATAD_BACKUP_TO instead"}},
		{name: "the client's own TLS variable", env: []string{"METADATAD_BACKUP_TO=" + filepath.Join(dir, "c"), "METADATAD_CLIENT_TLS_CA=" + filepath.Join(dir, "ca.crt")},
			code: 1, stderr: []string{"handshake"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := metadatadRun(t, tc.env, "backup", "-server", d.addr)
			if code != tc.code {
				t.Fatalf("exit status %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, stdout, stderr)
			}
			for _, want := range tc.stderr {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr lacks %q:\n%s", want, stderr)
				}
			}
			for _, not := range tc.not {
				if strings.Contains(stderr, not) {
					t.Errorf("stderr has %q:\n%s", not, stderr)
				}
			}
		})
	}
}
