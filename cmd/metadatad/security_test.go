package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
)

func TestSecurityFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"JWT without audience", []string{"-auth-jwks-url", "https://idp.test/keys", "-auth-issuer", "https://idp.test/"}, "-auth-audience"},
		{"two key sources", []string{"-auth-jwks-url", "https://idp.test/keys", "-auth-jwks-file", "k.json", "-auth-issuer", "i", "-auth-audience", "a"}, "not both"},
		{"reflection", []string{"-reflection", "public"}, "-reflection must be auth or open"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := parseConfig(tc.args); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("parseConfig: %v, want an error naming %s", err, tc.want)
			}
		})
	}
}

// TestDaemonWithTokenFile: with -auth-token-file, a purge needs a token
// holding retention.admin, and the daemon never logs the token.
func TestDaemonWithTokenFile(t *testing.T) {
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("s3cret-purger,cron,retention.admin\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, t.TempDir(), "-auth-token-file", tokens)
	client := metadatav1.NewRetentionServiceClient(d.conn(t))
	purge := &metadatav1.StartPurgeRequest{Cutoff: &metadatav1.StartPurgeRequest_RetentionDays{RetentionDays: 30}}
	if _, err := client.StartPurge(t.Context(), purge); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("purge without a token: %v, want UNAUTHENTICATED", err)
	}
	ctx := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer s3cret-purger")
	if _, err := client.StartPurge(ctx, purge); err != nil {
		t.Fatalf("purge with the token: %v", err)
	}
	var logs []string
	for len(logs) < 2 {
		logs = append(logs, <-d.logs)
		if strings.Contains(logs[len(logs)-1], "s3cret") {
			t.Fatalf("the daemon logged the token: %s", logs[len(logs)-1])
		}
	}
}
