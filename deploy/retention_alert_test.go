package deploy_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/util/annotations"

	"github.com/metadatad/metadatad/internal/telemetry"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention"
)

// nightlyPurges is a purge engine's view of a store where policies and
// thinning tiers are in force (the latest purge went by policy, so no one
// retention), and with held a legal hold, so rows a year old are kept on
// purpose; with purges, a purge of every image type starts each night at
// 02:00: those of the nights before succeedUntil succeed, the later ones
// fail. now is the simulated clock.
type nightlyPurges struct {
	start, now   time.Time
	held, purges bool
	succeedUntil time.Time
}

func (p *nightlyPurges) Stats() retention.Stats { return retention.Stats{} }
func (p *nightlyPurges) Now() time.Time         { return p.now }
func (p *nightlyPurges) Kinds() []images.Kind   { return images.Kinds }

func (p *nightlyPurges) Status(context.Context) (retention.Status, error) {
	s := retention.Status{Held: p.held, Oldest: map[images.Kind]time.Time{}, LastSucceeded: map[images.Kind]time.Time{}}
	for _, k := range images.Kinds {
		s.Oldest[k] = p.start.AddDate(-1, 0, 0)
	}
	if !p.purges {
		return s, nil
	}
	for night := p.start.Add(2 * time.Hour); !night.After(p.now); night = night.Add(24 * time.Hour) {
		if s.FirstPurge.IsZero() {
			s.FirstPurge = night
		}
		if night.Before(p.succeedUntil) {
			for _, k := range images.Kinds {
				s.LastSucceeded[k] = night.Add(20 * time.Minute)
			}
		}
	}
	return s, nil
}

// TestRetentionAlert evaluates MetadataRetentionBehind, as rules.yaml has
// it, with Prometheus's query engine, over what the purge collector
// exports during three simulated days scraped each minute: with policies,
// thinning and a hold keeping year-old rows and a purge succeeding each
// night it never fires; when purges never start, or stop succeeding, it
// fires two days after the last success (or the process's start) and its
// for: later, for every image type.
func TestRetentionAlert(t *testing.T) {
	rule := alertRule(t, "MetadataRetentionBehind")
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	const days = 3
	never := time.Duration(-1)
	for _, tc := range []struct {
		name   string
		purges nightlyPurges
		fires  time.Duration // after start; never for silence
	}{
		{name: "policies and thinning, a purge each night",
			purges: nightlyPurges{purges: true, succeedUntil: start.AddDate(0, 0, days)}, fires: never},
		{name: "policies, thinning and a hold, a purge each night",
			purges: nightlyPurges{held: true, purges: true, succeedUntil: start.AddDate(0, 0, days)}, fires: never},
		{name: "purges never start", purges: nightlyPurges{held: true}, fires: 48 * time.Hour},
		{name: "purges fail after the first night",
			purges: nightlyPurges{purges: true, succeedUntil: start.Add(24 * time.Hour)}, fires: 2*time.Hour + 20*time.Minute + 48*time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.purges
			p.start, p.now = start, start
			// The purge series alone: the process's own would only slow
			// 4,321 scrapes.
			m := &telemetry.Metrics{Registry: prometheus.NewRegistry()}
			m.WatchPurges(&p, telemetry.PurgeOptions{Started: start})
			var scrapes []map[string]float64
			for minute := 0; minute <= days*24*60; minute++ {
				p.now = start.Add(time.Duration(minute) * time.Minute)
				scrapes = append(scrapes, scrapeGauges(t, m))
			}
			fired := firing(t, scrapes, rule)
			if len(fired) != 0 && len(fired) != len(images.Kinds) {
				t.Errorf("fired for %d image types, want all %d or none: %v", len(fired), len(images.Kinds), fired)
			}
			for kind, at := range fired {
				if tc.fires == never {
					t.Errorf("fired for %s at %v after the start, want never", kind, at)
				} else if want := tc.fires + rule.For; at < want || at > want+2*time.Minute {
					t.Errorf("fired for %s at %v after the start, want at %v (the threshold and for: %v)", kind, at, want, rule.For)
				}
			}
			if tc.fires != never && len(fired) == 0 {
				t.Errorf("never fired, want at %v after the start", tc.fires+rule.For)
			}
		})
	}
}

// alert is an alerting rule's expression and for: duration.
type alert struct {
	Expr string
	For  time.Duration
}

// alertRule is the named alert of rules.yaml.
func alertRule(t *testing.T, name string) alert {
	t.Helper()
	for _, g := range parseRules(t, "prometheus/rules.yaml", nil).Groups {
		for _, r := range g.Rules {
			if r.Alert == name {
				return alert{Expr: r.Expr, For: time.Duration(r.For)}
			}
		}
	}
	t.Fatalf("rules.yaml has no alert %s", name)
	return alert{}
}

// scrapeGauges is each gauge series of the registry, as name{labels} in
// Prometheus's text form, with its value.
func scrapeGauges(t *testing.T, m *telemetry.Metrics) map[string]float64 {
	t.Helper()
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		if f.GetType() != dto.MetricType_GAUGE {
			continue
		}
		for _, s := range f.GetMetric() {
			var pairs []string
			for _, l := range s.GetLabel() {
				pairs = append(pairs, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			out[f.GetName()+"{"+strings.Join(pairs, ",")+"}"] = s.GetGauge().GetValue()
		}
	}
	return out
}

// firing evaluates the alert's expression each minute of the scrapes
// (one a minute, from the Unix epoch) with Prometheus's query engine, as
// its rule evaluation does, and returns for each series of its result
// when it first fired: when it had been in the result at every evaluation
// of its for: duration.
func firing(t *testing.T, scrapes []map[string]float64, rule alert) map[string]time.Duration {
	t.Helper()
	engine := promql.NewEngine(promql.EngineOpts{MaxSamples: 1 << 30, Timeout: time.Minute, LookbackDelta: 5 * time.Minute})
	epoch := time.Unix(0, 0).UTC()
	span := time.Duration(len(scrapes)-1) * time.Minute
	q, err := engine.NewRangeQuery(t.Context(), scraped(t, scrapes), nil, rule.Expr, epoch, epoch.Add(span), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	res := q.Exec(t.Context())
	matrix, err := res.Matrix()
	if err != nil {
		t.Fatal(err)
	}
	fired := map[string]time.Duration{}
	for _, s := range matrix {
		activeSince := int64(-1)
		for i, point := range s.Floats {
			if i == 0 || point.T != s.Floats[i-1].T+time.Minute.Milliseconds() {
				activeSince = point.T
			}
			if time.Duration(point.T-activeSince)*time.Millisecond >= rule.For {
				fired[s.Metric.String()] = time.Duration(point.T) * time.Millisecond
				break
			}
		}
	}
	return fired
}

// scraped is a storage holding the scrapes, one a minute from the epoch,
// for the query engine.
func scraped(t *testing.T, scrapes []map[string]float64) storage.Queryable {
	t.Helper()
	samples := map[string][]chunks.Sample{}
	for i, scrape := range scrapes {
		for s, v := range scrape {
			samples[s] = append(samples[s], point{t: int64(i) * time.Minute.Milliseconds(), f: v})
		}
	}
	var all []storage.Series
	for s, points := range samples {
		lset, err := parser.ParseMetric(s)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, storage.NewListSeries(lset, points))
	}
	slices.SortFunc(all, func(a, b storage.Series) int { return labels.Compare(a.Labels(), b.Labels()) })
	return &storage.MockQueryable{MockQuerier: &storage.MockQuerier{
		SelectMockFunction: func(_ bool, _ *storage.SelectHints, matchers ...*labels.Matcher) storage.SeriesSet {
			matched := &seriesSet{}
			for _, s := range all {
				if matchesAll(s.Labels(), matchers) {
					matched.series = append(matched.series, s)
				}
			}
			return matched
		}}}
}

func matchesAll(lset labels.Labels, matchers []*labels.Matcher) bool {
	for _, m := range matchers {
		if !m.Matches(lset.Get(m.Name)) {
			return false
		}
	}
	return true
}

// seriesSet is a storage.SeriesSet of a slice.
type seriesSet struct {
	series []storage.Series
	next   int
}

func (s *seriesSet) Next() bool                        { s.next++; return s.next <= len(s.series) }
func (s *seriesSet) At() storage.Series                { return s.series[s.next-1] }
func (s *seriesSet) Err() error                        { return nil }
func (s *seriesSet) Warnings() annotations.Annotations { return nil }

// point is a float sample.
type point struct {
	t int64
	f float64
}

func (p point) T() int64                    { return p.t }
func (p point) F() float64                  { return p.f }
func (point) H() *histogram.Histogram       { return nil }
func (point) FH() *histogram.FloatHistogram { return nil }
func (point) Type() chunkenc.ValueType      { return chunkenc.ValFloat }
func (p point) Copy() chunks.Sample         { return p }
