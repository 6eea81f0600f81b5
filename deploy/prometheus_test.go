package deploy_test

import (
	"fmt"
	"os"
	"regexp"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"sigs.k8s.io/yaml"
)

// TestAlertRules parses the rules file and the PrometheusRule as promtool
// check rules does (expressions, durations, label and annotation
// templates), checks they hold the same groups, that every series they
// select is one metadatad exports, and that the README's alert examples
// are among them as written.
func TestAlertRules(t *testing.T) {
	plain := parseRules(t, "prometheus/rules.yaml", nil)

	raw, err := os.ReadFile("prometheus/prometheusrule.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var crd object
	if err := yaml.UnmarshalStrict(raw, &crd); err != nil {
		t.Fatalf("prometheusrule.yaml: %v", err)
	}
	if crd.get("apiVersion") != "monitoring.coreos.com/v1" || crd.kind() != "PrometheusRule" || crd.name() == "" {
		t.Errorf("prometheusrule.yaml is %v %v %q, want a monitoring.coreos.com/v1 PrometheusRule", crd.get("apiVersion"), crd.kind(), crd.name())
	}
	spec, err := yaml.Marshal(crd.get("spec"))
	if err != nil {
		t.Fatal(err)
	}
	operator := parseRules(t, "prometheusrule.yaml's spec", spec)
	if fmt.Sprint(operator.Groups) != fmt.Sprint(plain.Groups) {
		t.Errorf("prometheusrule.yaml's groups differ from rules.yaml's:\n%v\n%v", operator.Groups, plain.Groups)
	}

	rules := map[string]rulefmt.Rule{}
	for _, g := range plain.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				t.Errorf("group %s: a recording rule %s; these files hold alerts", g.Name, r.Record)
				continue
			}
			if r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
				t.Errorf("alert %s has no severity label or no summary annotation", r.Alert)
			}
			rules[r.Alert] = r
			checkQuery(t, "alert "+r.Alert, r.Expr)
		}
	}

	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	examples := 0
	for _, block := range regexp.MustCompile("(?s)```yaml\n(- alert:.*?)```").FindAllSubmatch(readme, -1) {
		var documented []struct{ Alert, Expr, For string }
		if err := yaml.UnmarshalStrict(block[1], &documented); err != nil {
			t.Fatalf("README alert example: %v\n%s", err, block[1])
		}
		for _, d := range documented {
			examples++
			r, ok := rules[d.Alert]
			switch {
			case !ok:
				t.Errorf("the README's alert %s is not in prometheus/rules.yaml", d.Alert)
			case r.Expr != d.Expr || r.For.String() != d.For:
				t.Errorf("alert %s: the README has %q for %v, rules.yaml %q for %v", d.Alert, d.Expr, d.For, r.Expr, r.For)
			}
		}
	}
	if examples == 0 {
		t.Error("found no alert example in the README")
	}
}

// parseRules parses rule groups as Prometheus loads them, from content or
// else from the file name.
func parseRules(t *testing.T, name string, content []byte) *rulefmt.RuleGroups {
	t.Helper()
	if content == nil {
		var err error
		if content, err = os.ReadFile(name); err != nil {
			t.Fatal(err)
		}
	}
	groups, errs := rulefmt.Parse(content, false, model.UTF8Validation)
	for _, err := range errs {
		t.Errorf("%s: %v", name, err)
	}
	if len(errs) > 0 || groups == nil || len(groups.Groups) == 0 {
		t.Fatalf("%s holds no valid rule group", name)
	}
	return groups
}
