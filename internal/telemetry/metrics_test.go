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

func (t tallies) TallyProgress(tbl store.Table) (int64, bool, error) {
	p, ok := t[tbl.Name()]
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
