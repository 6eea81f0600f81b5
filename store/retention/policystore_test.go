package retention

import (
	"slices"
	"testing"
	"time"

	"github.com/metadatad/metadatad/store/retention/policy"
)

func TestTiersRoundTrip(t *testing.T) {
	tiers := []policy.Tier{
		{AfterDays: 30, KeepOnePer: 15 * time.Minute, UntilDays: 365},
		{AfterDays: 365, KeepOnePer: 24 * time.Hour},
	}
	s := encodeTiers(tiers)
	if s != "30:15:365,365:1440:0" {
		t.Errorf("encoded as %q", s)
	}
	got, err := decodeTiers(s)
	if err != nil || !slices.Equal(got, tiers) {
		t.Errorf("decodeTiers(%q) = %v, %v; want %v", s, got, err, tiers)
	}
	for _, bad := range []string{"30:15", "a:15:0", "30:15:0,"} {
		if _, err := decodeTiers(bad); err == nil {
			t.Errorf("decodeTiers(%q) read", bad)
		}
	}
}
