package deploy_test

import (
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// TestManifestsRollOut checks what a rollout and a lost node need: an
// image from a registry at a pinned tag, a preStop delay that the grace
// period covers with -shutdown-timeout, and the Azure replicas spread one
// to a node.
func TestManifestsRollOut(t *testing.T) {
	objects := loadManifests(t)
	for workload, c := range metadatadContainers(t, objects) {
		host, _, _ := strings.Cut(c.Image, "/")
		if !strings.ContainsAny(host, ".:") || strings.HasSuffix(c.Image, ":latest") || !strings.Contains(c.Image[len(host):], ":") {
			t.Errorf("%s: image %q, want REGISTRY/metadatad:TAG, a registry and a tag other than latest", workload, c.Image)
		}
		kind, name, _ := strings.Cut(workload, "/")
		spec := podSpec(find(t, objects, kind, name))
		sleep, _ := spec.get("containers", 0, "lifecycle", "preStop", "sleep", "seconds").(float64)
		if sleep <= 0 {
			t.Errorf("%s: no preStop sleep: the pod would stop accepting before its endpoints are gone", workload)
		}
		var shutdown time.Duration
		for _, arg := range c.Args {
			if v, ok := strings.CutPrefix(arg, "-shutdown-timeout="); ok {
				shutdown, _ = time.ParseDuration(v)
			}
		}
		grace, _ := spec.get("terminationGracePeriodSeconds").(float64)
		if time.Duration(grace)*time.Second <= time.Duration(sleep)*time.Second+shutdown {
			t.Errorf("%s: terminationGracePeriodSeconds %v is not above the preStop sleep %vs plus -shutdown-timeout %v", workload, grace, sleep, shutdown)
		}
	}
	deployment := find(t, objects, "Deployment", "metadatad")
	labels := fmt.Sprint(deployment.get("spec", "template", "metadata", "labels"))
	spread := false
	constraints, _ := podSpec(deployment).get("topologySpreadConstraints").([]any)
	for i := range constraints {
		c := object(constraints[i].(map[string]any))
		if c.get("topologyKey") == "kubernetes.io/hostname" && c.get("whenUnsatisfiable") == "DoNotSchedule" &&
			fmt.Sprint(c.get("labelSelector", "matchLabels")) == labels {
			spread = true
		}
	}
	if !spread {
		t.Error("the Deployment's replicas are not spread one to a node (topologySpreadConstraints on kubernetes.io/hostname)")
	}
}

// TestCronJobDialsAService: the host the purge CronJob dials is a Service
// of the manifests, on its port, selecting metadatad's pods, and a name
// the serving certificate is said to hold.
func TestCronJobDialsAService(t *testing.T) {
	objects := loadManifests(t)
	job := containers(t, podSpec(find(t, objects, "CronJob", "metadatad-purge")))[0]
	i := slices.IndexFunc(job.Env, func(e envVar) bool { return e.Name == "METADATAD_ADDR" })
	if i < 0 {
		t.Fatal("the CronJob names the server in no METADATAD_ADDR")
	}
	host, port, err := net.SplitHostPort(job.Env[i].Value)
	if err != nil {
		t.Fatalf("METADATAD_ADDR %q: %v", job.Env[i].Value, err)
	}
	svc := find(t, objects, "Service", host)
	ports, _ := svc.get("spec", "ports").([]any)
	if !slices.ContainsFunc(ports, func(p any) bool { return fmt.Sprint(p.(map[string]any)["port"]) == port }) {
		t.Errorf("Service %s has no port %s", host, port)
	}
	selects := false
	for _, o := range objects {
		if podSpec(o) != nil && o.kind() != "CronJob" && fmt.Sprint(o.get("spec", "selector", "matchLabels")) == fmt.Sprint(svc.get("spec", "selector")) {
			selects = true
		}
	}
	if !selects {
		t.Errorf("Service %s selects no metadatad workload", host)
	}
	secrets, err := os.ReadFile("kubernetes/secrets.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(secrets), " "+host+",") {
		t.Errorf("secrets.yaml's certificate names no SAN %s, which the CronJob's -cacert checks", host)
	}
}

// TestPodMonitor: beside the PrometheusRule, a PodMonitor scrapes the
// metrics port of both workloads' pods, under the job label the rules and
// dashboard select.
func TestPodMonitor(t *testing.T) {
	raw, err := os.ReadFile("prometheus/podmonitor.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var pm object
	if err := yaml.UnmarshalStrict(raw, &pm); err != nil {
		t.Fatalf("podmonitor.yaml: %v", err)
	}
	if pm.get("apiVersion") != "monitoring.coreos.com/v1" || pm.kind() != "PodMonitor" {
		t.Fatalf("podmonitor.yaml is %v %v, want a monitoring.coreos.com/v1 PodMonitor", pm.get("apiVersion"), pm.kind())
	}
	port, _ := pm.get("spec", "podMetricsEndpoints", 0, "port").(string)
	selector := pm.get("spec", "selector", "matchLabels").(map[string]any)
	components := fmt.Sprint(pm.get("spec", "selector", "matchExpressions", 0, "values"))
	objects := loadManifests(t)
	for workload, c := range metadatadContainers(t, objects) {
		kind, name, _ := strings.Cut(workload, "/")
		labels := find(t, objects, kind, name).get("spec", "template", "metadata", "labels").(map[string]any)
		for k, v := range selector {
			if labels[k] != v {
				t.Errorf("the PodMonitor selects %s=%v; %s's pods have %v", k, v, workload, labels[k])
			}
		}
		if !strings.Contains(components, fmt.Sprint(labels["app.kubernetes.io/component"])) {
			t.Errorf("the PodMonitor's components %s leave out %s", components, workload)
		}
		i := slices.IndexFunc(c.Ports, func(p struct {
			Name          string
			ContainerPort int `json:"containerPort"`
		}) bool {
			return p.Name == port
		})
		if i < 0 || !slices.Contains(c.Args, fmt.Sprintf("-metrics-listen=:%d", c.Ports[i].ContainerPort)) {
			t.Errorf("the PodMonitor scrapes port %q, which is not %s's -metrics-listen", port, workload)
		}
	}
}

// TestAlertsCoverAnOperatorsDay: the rules alert on a target down, the
// server's own error ratio, slow calls, a storage budget held over, and
// purges that have not succeeded, each on the series that shows it.
func TestAlertsCoverAnOperatorsDay(t *testing.T) {
	exprs := map[string]string{}
	for _, g := range parseRules(t, "prometheus/rules.yaml", nil).Groups {
		for _, r := range g.Rules {
			exprs[r.Alert] = r.Expr
		}
	}
	for alert, series := range map[string]string{
		"MetadataTargetDown":      `up{job="metadatad"}`,
		"MetadataServerErrors":    "grpc_server_handled_total",
		"MetadataSlowCalls":       "grpc_server_handling_seconds_bucket",
		"MetadataBudgetBlocked":   "metadatad_retention_budget_blocked",
		"MetadataRetentionBehind": "metadatad_purge_since_success_seconds",
	} {
		if !strings.Contains(exprs[alert], series) {
			t.Errorf("alert %s: %q does not select %s", alert, exprs[alert], series)
		}
	}
}
