package deploy_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	promql "github.com/prometheus/prometheus/promql/parser"
)

var exported struct {
	sync.Once
	names map[string]bool
}

// exportedSeries are the series names metadatad exports: every family a
// running daemon serves (embedded store, TLS on, a retention schedule set),
// histograms as their _bucket, _sum and _count series, and the metadatad_
// names its code declares, for the series that appear only on Azure, after
// a failure or once a purge ended. The served metadatad_ families must be
// among the declared ones, or this reading of the code misses some.
func exportedSeries(t *testing.T) map[string]bool {
	t.Helper()
	exported.Do(func() {
		served := scrapeDaemon(t)
		declared := declaredSeries(t)
		exported.names = map[string]bool{}
		for name, family := range served {
			if strings.HasPrefix(name, "metadatad_") && !declared[name] {
				t.Errorf("metadatad serves %s, which no string literal of its code names", name)
			}
			switch family.GetType() {
			case dto.MetricType_HISTOGRAM:
				for _, suffix := range []string{"_bucket", "_sum", "_count"} {
					exported.names[name+suffix] = true
				}
			case dto.MetricType_SUMMARY:
				for _, suffix := range []string{"", "_sum", "_count"} {
					exported.names[name+suffix] = true
				}
			default:
				exported.names[name] = true
			}
		}
		for name := range declared {
			if _, ok := served[name]; !ok {
				exported.names[name] = true
			}
		}
	})
	if exported.names == nil {
		t.Fatal("the exported series could not be read (see the first test that asked)")
	}
	return exported.names
}

// scrapeDaemon starts metadatad and reads its /metrics.
func scrapeDaemon(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	dir := t.TempDir()
	for name, content := range testCertificates(t) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	addrs := startDaemon(t, []string{
		"-store=embedded", "-data-dir=" + filepath.Join(dir, "data"), "-min-free-mib=0",
		"-listen=127.0.0.1:0", "-metrics-listen=127.0.0.1:0", "-log-format=json",
		"-tls-cert=" + filepath.Join(dir, "tls.crt"), "-tls-key=" + filepath.Join(dir, "tls.key"),
		"-retention-days=30", "-retention-interval=24h",
	}, nil)
	resp, err := http.Get("http://" + addrs["serving metrics"] + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("/metrics: %v", err)
	}
	return families
}

var seriesName = regexp.MustCompile(`^metadatad_[a-z0-9_]+$`)

// declaredSeries are the string literals of the module's code (tests and
// generated code aside) that are metadatad_ series names.
func declaredSeries(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	fset := token.NewFileSet()
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == "gen" || strings.HasPrefix(d.Name(), ".") && d.Name() != "..") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil && seriesName.MatchString(s) {
					names[s] = true
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// checkQuery parses a PromQL expression and checks that each series it
// selects is one metadatad exports.
func checkQuery(t *testing.T, where, expr string) {
	t.Helper()
	parsed, err := promql.ParseExpr(expr)
	if err != nil {
		t.Errorf("%s: %q: %v", where, expr, err)
		return
	}
	exported := exportedSeries(t)
	promql.Inspect(parsed, func(n promql.Node, _ []promql.Node) error {
		// up is Prometheus's own series of each target it scrapes.
		if vs, ok := n.(*promql.VectorSelector); ok && !exported[vs.Name] && vs.Name != "up" {
			t.Errorf("%s: %q selects %q, which metadatad does not export", where, expr, vs.Name)
		}
		return nil
	})
}
