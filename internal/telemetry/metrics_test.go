package telemetry_test

import (
	"crypto/x509"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/metadatad/metadatad/internal/telemetry"
	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/retention/embedded"
)

// TestCertificateExpiry follows the certificate in use: absent before
// there is one, then each rotated certificate's NotAfter.
func TestCertificateExpiry(t *testing.T) {
	m := telemetry.NewMetrics()
	var current atomic.Pointer[x509.Certificate]
	m.WatchCertificate("serving", current.Load)
	if n, err := testutil.GatherAndCount(m.Registry, "metadatad_tls_certificate_expiry_timestamp_seconds"); err != nil || n != 0 {
		t.Fatalf("%d series before any certificate (%v), want 0", n, err)
	}
	for _, notAfter := range []time.Time{time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2027, 4, 1, 0, 0, 0, 0, time.UTC)} {
		current.Store(&x509.Certificate{NotAfter: notAfter})
		want := `
# HELP metadatad_tls_certificate_expiry_timestamp_seconds NotAfter of the certificate in use, in Unix seconds.
# TYPE metadatad_tls_certificate_expiry_timestamp_seconds gauge
metadatad_tls_certificate_expiry_timestamp_seconds{name="serving"} ` + strconv.FormatInt(notAfter.Unix(), 10) + "\n"
		if err := testutil.GatherAndCompare(m.Registry, strings.NewReader(want), "metadatad_tls_certificate_expiry_timestamp_seconds"); err != nil {
			t.Error(err)
		}
	}
}

type azureClock struct{ date, local uint64 }

func (c *azureClock) ClockFallbacks() (date, local uint64) { return c.date, c.local }

// TestAzureClockFallbacks exposes the backend's counts by source.
func TestAzureClockFallbacks(t *testing.T) {
	m := telemetry.NewMetrics()
	m.WatchAzureClock(&azureClock{date: 3, local: 1})
	want := `
# HELP metadatad_azure_clock_fallback_total Azure writes whose Timestamp did not come from the service's ETag, by the source that stood in: the answer's Date header (date, to the second) or this process's clock (local).
# TYPE metadatad_azure_clock_fallback_total counter
metadatad_azure_clock_fallback_total{source="date"} 3
metadatad_azure_clock_fallback_total{source="local"} 1
`
	if err := testutil.GatherAndCompare(m.Registry, strings.NewReader(want), "metadatad_azure_clock_fallback_total"); err != nil {
		t.Error(err)
	}
}

type tallies map[string]struct {
	rows     int64
	complete bool
}

func (t tallies) TallyProgress(table string) (int64, bool, error) {
	p, ok := t[table]
	if !ok {
		return 0, false, errors.New("not tallied")
	}
	return p.rows, p.complete, nil
}

type namedTable struct {
	store.Table
	name string
}

func (n namedTable) Name() string { return n.name }

// TestTallyBackfill exposes each tallied table's backfill, and nothing of
// a table not tallied.
func TestTallyBackfill(t *testing.T) {
	m := telemetry.NewMetrics()
	m.WatchTallies(tallies{"Single": {rows: 1200, complete: true}, "Pano": {rows: 7}},
		[]store.Table{namedTable{name: "Single"}, namedTable{name: "Pano"}, namedTable{name: "Untallied"}})
	want := `
# HELP metadatad_tally_backfill_rows_total Rows the backfill of a table's tally has counted since the process started.
# TYPE metadatad_tally_backfill_rows_total counter
metadatad_tally_backfill_rows_total{table="Pano"} 7
metadatad_tally_backfill_rows_total{table="Single"} 1200
# HELP metadatad_tally_complete 1 once a table's tally counts every row (purges wait for it), else 0.
# TYPE metadatad_tally_complete gauge
metadatad_tally_complete{table="Pano"} 0
metadatad_tally_complete{table="Single"} 1
`
	if err := testutil.GatherAndCompare(m.Registry, strings.NewReader(want), "metadatad_tally_backfill_rows_total", "metadatad_tally_complete"); err != nil {
		t.Error(err)
	}
}

type budgetState embedded.BudgetState

func (b budgetState) BudgetState() embedded.BudgetState { return embedded.BudgetState(b) }

// TestBudgetSeries: the storage budget's series say its bytes, the live
// data it measured, and whether holds keep the store over it.
func TestBudgetSeries(t *testing.T) {
	m := telemetry.NewMetrics()
	m.WatchBudget(budgetState{MaxBytes: 1000, LiveBytes: 1200, Measured: time.Now(), Over: true, Blocked: "held"})
	want := `
# HELP metadatad_retention_budget_blocked 1 while the store is over budget and only images that are held (reason="held") or younger than the floor (reason="floor") are left to purge.
# TYPE metadatad_retention_budget_blocked gauge
metadatad_retention_budget_blocked{reason="floor"} 0
metadatad_retention_budget_blocked{reason="held"} 1
# HELP metadatad_retention_budget_bytes The storage budget (-retention-max-bytes): the most live data the embedded store may hold.
# TYPE metadatad_retention_budget_bytes gauge
metadatad_retention_budget_bytes 1000
# HELP metadatad_retention_over_budget 1 while the live data is over the budget (the budget purges the oldest images), else 0.
# TYPE metadatad_retention_over_budget gauge
metadatad_retention_over_budget 1
# HELP metadatad_store_live_bytes The embedded store's live data as the budget last measured it: stored bytes less what deletions will reclaim.
# TYPE metadatad_store_live_bytes gauge
metadatad_store_live_bytes 1200
`
	if err := testutil.GatherAndCompare(m.Registry, strings.NewReader(want), "metadatad_retention_budget_blocked",
		"metadatad_retention_budget_bytes", "metadatad_retention_over_budget", "metadatad_store_live_bytes"); err != nil {
		t.Error(err)
	}
}
