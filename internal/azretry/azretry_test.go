package azretry_test

import (
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"

	"github.com/metadatad/metadatad/internal/azretry"
)

func TestWithDefaults(t *testing.T) {
	got := azretry.WithDefaults(policy.RetryOptions{})
	if got.MaxRetries != 5 || got.RetryDelay != 500*time.Millisecond || got.MaxRetryDelay != 30*time.Second ||
		got.TryTimeout != time.Minute || got.StatusCodes != nil {
		t.Fatalf("defaults %+v", got)
	}
	set := policy.RetryOptions{MaxRetries: -1, RetryDelay: time.Millisecond, MaxRetryDelay: time.Second, TryTimeout: time.Second, StatusCodes: []int{503}}
	if kept := azretry.WithDefaults(set); kept.MaxRetries != -1 || kept.RetryDelay != time.Millisecond ||
		kept.MaxRetryDelay != time.Second || kept.TryTimeout != time.Second || len(kept.StatusCodes) != 1 {
		t.Fatalf("set fields changed: %+v", kept)
	}
}
