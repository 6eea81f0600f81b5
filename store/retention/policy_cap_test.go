package retention_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention"
	"github.com/metadatad/metadatad/store/retention/policy"
	"github.com/metadatad/metadatad/store/retention/retentiontest"
)

// TestPrefixPolicyCapHoldsUnderConcurrentCreates: more creators of
// distinct prefix policies than the cap allows, each held at its first
// write until every one has read what it read, end with exactly the cap
// created, the others refused with ErrTooManyPrefixes. Then a deletion
// frees one place, which one more create takes.
func TestPrefixPolicyCapHoldsUnderConcurrentCreates(t *testing.T) {
	forEachStore(t, func(t *testing.T, newFixture func(*testing.T, retentiontest.Options) *fixture) {
		const limit, creators = 3, 10
		f := newFixture(t, quickOptions())

		// Each creator's first write waits until every creator has come to
		// its own first write: a check then insert lets them all through.
		var mu sync.Mutex
		arrived := map[string]bool{}
		all := make(chan struct{})
		f.OpenEngine(t, &hookedBackend{Backend: f.Base, Before: func(table, _ string, keys []store.Key) error {
			if !strings.EqualFold(table, retention.DefaultPoliciesTable) {
				return nil
			}
			for _, k := range keys {
				if k.PartitionKey != string(policy.ScopePrefix) || !strings.HasPrefix(k.RowKey, "site-") {
					continue
				}
				mu.Lock()
				first := !arrived[k.RowKey]
				arrived[k.RowKey] = true
				if first && len(arrived) == creators {
					close(all)
				}
				mu.Unlock()
				if first {
					select {
					case <-all:
					case <-time.After(patience):
						t.Error("not every creator came to its first write")
					}
				}
			}
			return nil
		}})
		policies := f.Engine.Policies()
		retention.SetMaxPrefixPolicies(policies, limit)

		errs := make([]error, creators)
		var wg sync.WaitGroup
		for i := range creators {
			wg.Go(func() {
				_, errs[i] = policies.CreatePolicy(t.Context(), policy.Policy{Scope: policy.ScopePrefix,
					Target: fmt.Sprintf("site-%02d", i), Days: map[images.Kind]int{images.Single: 1}})
			})
		}
		wg.Wait()
		created := 0
		for i, err := range errs {
			switch {
			case err == nil:
				created++
			case !errors.Is(err, retention.ErrTooManyPrefixes):
				t.Fatalf("creator %d: %v; want success or ErrTooManyPrefixes", i, err)
			}
		}
		stored := prefixPolicies(t, policies)
		if created != limit || len(stored) != limit {
			t.Fatalf("%d creates succeeded, %d prefix policies stored (%v); want exactly the cap, %d", created, len(stored), stored, limit)
		}

		if err := policies.DeletePolicy(t.Context(), policy.ScopePrefix, stored[0], ""); err != nil {
			t.Fatal(err)
		}
		if _, err := policies.CreatePolicy(t.Context(), policy.Policy{Scope: policy.ScopePrefix, Target: "site-late",
			Days: map[images.Kind]int{images.Single: 1}}); err != nil {
			t.Fatalf("create after a delete freed a place: %v", err)
		}
		if _, err := policies.CreatePolicy(t.Context(), policy.Policy{Scope: policy.ScopePrefix, Target: "site-later",
			Days: map[images.Kind]int{images.Single: 1}}); !errors.Is(err, retention.ErrTooManyPrefixes) {
			t.Fatalf("create beyond the cap: %v; want ErrTooManyPrefixes", err)
		}
		if got := prefixPolicies(t, policies); len(got) != limit {
			t.Fatalf("prefix policies %v; want %d", got, limit)
		}
	})
}

// prefixPolicies lists the targets of the stored prefix policies.
func prefixPolicies(t *testing.T, p *retention.Policies) []string {
	t.Helper()
	var out []string
	var resume *store.Cursor
	for {
		page, next, err := p.ListPolicies(t.Context(), 100, resume)
		if err != nil {
			t.Fatal(err)
		}
		for _, pol := range page {
			if pol.Scope == policy.ScopePrefix {
				out = append(out, pol.Target)
			}
		}
		if next == nil {
			return out
		}
		resume = next
	}
}
