package deploy_test

import (
	"encoding/json"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// dashboardVariables stand in for what Grafana substitutes in a query.
var dashboardVariables = strings.NewReplacer(
	"$__rate_interval", "5m",
	"$job", "metadatad",
	"$instance", "10.0.0.1:9464",
)

// TestDashboard parses the Grafana dashboard and every query of its
// panels and variables, checks each series they select is one metadatad
// exports, that its rows cover what an operator looks for and every series
// of metadatad's own is on a panel, and that its server error ratio is the
// one MetadataServerErrors alerts on.
func TestDashboard(t *testing.T) {
	raw, err := os.ReadFile("grafana/metadatad.json")
	if err != nil {
		t.Fatal(err)
	}
	var dashboard struct {
		Title, UID string
		Panels     []struct {
			ID      int
			Type    string
			Title   string
			Targets []struct {
				RefID string `json:"refId"`
				Expr  string
			}
		}
		Templating struct {
			List []struct {
				Name, Type string
				Definition string
			}
		}
	}
	if err := json.Unmarshal(raw, &dashboard); err != nil {
		t.Fatalf("metadatad.json: %v", err)
	}
	if dashboard.Title == "" || dashboard.UID == "" {
		t.Error("the dashboard has no title or uid")
	}
	ids := map[int]bool{}
	queries := map[string]string{} // panel title: its queries
	var rows []string
	for _, p := range dashboard.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d is used twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			rows = append(rows, p.Title)
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, target := range p.Targets {
			checkQuery(t, "panel "+p.Title, dashboardVariables.Replace(target.Expr))
			queries[p.Title] += target.Expr + "\n"
		}
	}
	for _, v := range dashboard.Templating.List {
		if v.Type != "query" {
			continue
		}
		// label_values(selector, label): the selector is a query of its own.
		selector, ok := strings.CutPrefix(v.Definition, "label_values(")
		i := strings.LastIndex(selector, ",")
		if !ok || i < 0 {
			t.Errorf("variable %s: %q is not label_values(selector, label)", v.Name, v.Definition)
			continue
		}
		checkQuery(t, "variable "+v.Name, dashboardVariables.Replace(selector[:i]))
	}
	// Panels of failures show failures: answers (a NOT_FOUND, a get that
	// finds nothing) and callers that gave up are not the server's faults.
	for title, matcher := range map[string]string{
		"Errors per second":               `grpc_code!~\"OK|NotFound|Canceled\"`,
		"Store operation failures":        `error=\"failure\"`,
		"Since the last successful purge": "metadatad_purge_since_success_seconds",
	} {
		if !strings.Contains(queries[title], strings.ReplaceAll(matcher, `\"`, `"`)) {
			t.Errorf("panel %q: %q lacks %s", title, queries[title], matcher)
		}
	}
	// Every series of metadatad's own is on a panel, but the two that are
	// labels or a timestamp rather than a state to watch.
	all := strings.Join(slices.Collect(maps.Values(queries)), "")
	for name := range declaredSeries(t) {
		if name != "metadatad_build_info" && name != "metadatad_purge_last_success_timestamp_seconds" && !strings.Contains(all, name) {
			t.Errorf("no panel shows %s", name)
		}
	}
	// The panel of the server's error ratio is the ratio its alert fires on.
	codes := regexp.MustCompile(`grpc_code=~"([^"]*)"`)
	serverErrors := alertRule(t, "MetadataServerErrors").Expr
	if got, want := codes.FindStringSubmatch(queries["Server error ratio"]), codes.FindStringSubmatch(serverErrors); got == nil || want == nil || got[1] != want[1] {
		t.Errorf("panel \"Server error ratio\" counts codes %v, MetadataServerErrors %v", got, want)
	}
	want := []string{"RPCs", "Purges", "Store", "Disk and memory", "Fleet"}
	if strings.Join(rows, ",") != strings.Join(want, ",") {
		t.Errorf("the dashboard's rows are %q, want %q", rows, want)
	}
}
